/**
 * How a Kiln process ends: on SIGINT/SIGTERM it drains (`close`) and exits 0; on a fault nothing
 * caught (an unhandled rejection, an uncaught exception) it logs the fault with the jobs running
 * then (core/context.ts), drains the same way and exits 1, so a supervisor restarts it. A second
 * signal, or a fault during the drain, exits at once.
 */
import { runningWork } from "../core/context.js";
import type { Logger } from "../core/log.js";

/** Longest a drain after a fault may take before the process exits regardless. */
const FAULT_EXIT_MS = 60_000;

export function onShutdown(logger: Logger, close: () => Promise<void>, exit: (code: number) => void = (code) => process.exit(code)): void {
  let closing = false;
  const stop = (code: number): void => {
    if (closing) return exit(code || 1);
    closing = true;
    close().then(
      () => exit(code),
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        exit(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, "shutting down");
    stop(0);
  };
  const onFault =
    (kind: string) =>
    (err: unknown): void => {
      // with the work running then (core/context.ts): the job, when one ran
      logger.error({ ...runningWork(), err }, `${kind}: draining and exiting (this is a bug in Kiln; please report it)`);
      // After a fault the drain itself may hang: the process exits anyway, for its supervisor to restart it.
      setTimeout(() => exit(1), FAULT_EXIT_MS).unref();
      stop(1);
    };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("unhandledRejection", onFault("unhandled rejection"));
  process.on("uncaughtException", onFault("uncaught exception"));
}

import type { Logger } from "../core/log.js";

/** Runs `close` once on SIGINT/SIGTERM, then exits; a second signal exits at once. */
export function onShutdown(logger: Logger, close: () => Promise<void>): void {
  let closing = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (closing) process.exit(1);
    closing = true;
    logger.info({ signal }, "shutting down");
    close().then(() => process.exit(0), (err: unknown) => { logger.error({ err }, "shutdown failed"); process.exit(1); });
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
}

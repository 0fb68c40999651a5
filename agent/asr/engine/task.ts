/**
 * One native task (voice activity, diarization) in a child process of its own: the event loop
 * stays free while the engine's synchronous work runs, and a native crash fails the task, not the
 * agent. The child says `ready`, takes its request in a `run` message, posts `progress` (a
 * fraction), then one `done` (the value) or `error` (a message).
 */
import { EngineError, JobAbortedError } from "../errors.js";
import { describeExit } from "../../../core/child.js";
import { forkEngine } from "./fork.js";

export type TaskMessage<T> = { kind: "ready" } | { kind: "progress"; fraction: number } | { kind: "done"; value: T } | { kind: "error"; message: string };

interface RunMessage<R> {
  kind: "run";
  request: R;
}

/**
 * Runs the compiled task module `path` (relative to agent/asr) on `request` in a child process.
 * Rejects with `JobAbortedError` if `signal` aborts (the child is killed), and with an
 * `EngineError` naming `what` when the task fails or its process dies ("… crashed (SIGSEGV)").
 */
export function runTask<R, T>(path: string, what: string, request: R, onProgress?: (fraction: number) => void, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(new JobAbortedError());
    const child = forkEngine(path);
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      fn();
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    };
    const onAbort = () => settle(() => reject(new JobAbortedError()));
    signal?.addEventListener("abort", onAbort, { once: true });
    let failure: Error | undefined;
    const fail = (err: Error) => settle(() => reject(new EngineError(`${what} failed: ${err.message}`, { cause: err })));
    child.on("message", (m: TaskMessage<T>) => {
      if (m.kind === "ready") {
        if (child.connected) child.send({ kind: "run", request } satisfies RunMessage<R>);
      } else if (m.kind === "progress") onProgress?.(m.fraction);
      else if (m.kind === "done") settle(() => resolve(m.value));
      else settle(() => reject(new EngineError(`${what} failed: ${m.message}`)));
    });
    // Spawning failed (no process, no `close` to come), or the channel failed: the process goes.
    child.on("error", (err) => {
      if (child.pid === undefined) return fail(err);
      failure ??= err;
      child.kill("SIGKILL");
    });
    child.on("close", (code, sig) => {
      if (failure) return fail(failure);
      settle(() => reject(new EngineError(code === 0 && !sig ? `${what} ended without a result` : `${what} crashed (${describeExit(code, sig)})`)));
    });
  });
}

/**
 * For task modules: takes the request, runs `work` on it and posts the outcome to the parent.
 * The process ends when the parent goes (its IPC channel closes).
 */
export function serveTask<R, T>(work: (request: R, onProgress: (fraction: number) => void) => Promise<T>): void {
  const post = (m: TaskMessage<T>) => {
    if (process.connected) process.send!(m);
  };
  process.on("disconnect", () => process.exit(0));
  process.once("message", (m: RunMessage<R>) => {
    work(m.request, (fraction) => post({ kind: "progress", fraction })).then(
      (value) => post({ kind: "done", value }),
      (err: unknown) => post({ kind: "error", message: err instanceof Error ? err.message : String(err) }),
    );
  });
  post({ kind: "ready" });
}

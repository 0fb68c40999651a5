/**
 * Running a native engine's synchronous work in a worker thread, so the event loop stays free.
 * A worker posts `progress` (a fraction), then one `done` (the value) or `error` (a message).
 */
import { Worker } from "node:worker_threads";
import { existingOr } from "../../core/paths.js";
import { EngineError, JobAbortedError } from "./errors.js";

export type WorkerMessage<T> =
  | { kind: "progress"; fraction: number }
  | { kind: "done"; value: T }
  | { kind: "error"; message: string };

/**
 * The compiled worker module `path` (relative to agent/asr); when this code runs from its
 * TypeScript sources (vitest), the module is taken from the build in dist/ (`npm test` builds first).
 */
function workerUrl(path: string): URL {
  return existingOr(new URL(`./${path}`, import.meta.url), new URL(`../../dist/agent/asr/${path}`, import.meta.url));
}

/** Runs the worker module at `path` with `data`; rejects with `JobAbortedError` if `signal` aborts. */
export function runWorker<T>(path: string, what: string, data: unknown, onProgress?: (fraction: number) => void, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(new JobAbortedError());
    const worker = new Worker(workerUrl(path), { workerData: data });
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      fn();
      void worker.terminate();
    };
    const onAbort = () => settle(() => reject(new JobAbortedError()));
    signal?.addEventListener("abort", onAbort, { once: true });
    worker.on("message", (m: WorkerMessage<T>) => {
      if (m.kind === "progress") onProgress?.(m.fraction);
      else if (m.kind === "done") settle(() => resolve(m.value));
      else settle(() => reject(new EngineError(`${what} failed: ${m.message}`)));
    });
    worker.on("error", (err) => settle(() => reject(new EngineError(`${what} failed: ${err.message}`, { cause: err }))));
    worker.on("exit", (code) => settle(() => reject(new EngineError(`${what} worker exited (${code})`))));
  });
}

/** For worker modules: posts the outcome of `work` to the parent. */
export function serveWorker<T>(work: (post: (m: WorkerMessage<T>) => void) => Promise<T>, port: { postMessage(m: unknown): void }): void {
  const post = (m: WorkerMessage<T>) => port.postMessage(m);
  work(post).then(
    (value) => post({ kind: "done", value }),
    (err: unknown) => post({ kind: "error", message: err instanceof Error ? err.message : String(err) }),
  );
}

/**
 * The work running now (an agent's transcription jobs), by the fields that name it: the
 * process-level fault handler logs it with an unhandled rejection or an uncaught exception, so the
 * operator can tell which job ran when the fault came (the job itself when it ran alone, the list
 * when several did).
 *
 * Not AsyncLocalStorage, which would name the job whose promises the fault came from: on Node 20
 * its first `run` puts a hook on every promise the process makes from then on, and every agent that
 * once ran a transcription job paid it on every chat token after (about 10 µs of JavaScript a token
 * on the batch path, 24 → 34 µs between two decode calls: docs/performance.md).
 */

/** Fields that name the work: `job`. */
export type WorkContext = Readonly<Record<string, string>>;

const running = new Set<WorkContext>();

/** Runs `work`, named by `fields` while it runs (until its promise settles). */
export function duringWork<T>(fields: WorkContext, work: () => Promise<T>): Promise<T> {
  const entry = { ...fields };
  running.add(entry);
  let settled: Promise<T>;
  try {
    settled = work();
  } catch (err) {
    running.delete(entry);
    return Promise.reject(err as Error);
  }
  return settled.finally(() => running.delete(entry));
}

/** What names the work running now: its fields when one piece runs, `{ running: [...] }` when several do, `{}` when none. */
export function runningWork(): Record<string, unknown> {
  if (running.size === 0) return {};
  if (running.size === 1) return { ...running.values().next().value };
  return { running: [...running] };
}

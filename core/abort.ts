/**
 * `promise`'s outcome, or a rejection as soon as `signal` aborts (at once when it already has):
 * the signal's reason, or `reason()` when given. The promise itself goes on; `late` gets its value
 * if it comes after all (a resource to close).
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, options: { reason?: () => Error; late?: (value: T) => void } = {}): Promise<T> {
  if (!signal) return promise;
  const why = () => options.reason?.() ?? (signal.reason as Error);
  if (signal.aborted) {
    promise.then((value) => options.late?.(value)).catch(() => undefined);
    return Promise.reject(why());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      promise.then((value) => options.late?.(value)).catch(() => undefined);
      reject(why());
    };
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

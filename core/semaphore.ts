/** A counting semaphore: `acquire()` resolves with a release function once a permit is free (FIFO). */
export class Semaphore {
  private readonly waiters: (() => void)[] = [];
  private free: number;

  constructor(permits: number) {
    this.free = permits;
  }

  /** Waits for a permit; with `signal`, stops waiting (rejecting with its reason) when it aborts first. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) throw signal.reason;
    if (this.free > 0) this.free--;
    else
      await new Promise<void>((resolve, reject) => {
        const granted = () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        };
        const onAbort = () => {
          this.waiters.splice(this.waiters.indexOf(granted), 1);
          reject(signal!.reason as Error);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        this.waiters.push(granted);
      });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next();
      else this.free++;
    };
  }
}

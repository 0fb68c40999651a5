/** Capped exponential backoff with "equal jitter": half the step fixed, half random. */
export class Backoff {
  private attempt = 0;

  /**
   * @param initialMs first step (default 250 ms)
   * @param maxMs ceiling of a step (default 30 s)
   */
  constructor(
    private readonly initialMs = 250,
    private readonly maxMs = 30_000,
    private readonly random: () => number = Math.random,
  ) {}

  /** The delay before the next attempt. */
  next(): number {
    const step = Math.min(this.maxMs, this.initialMs * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 30);
    return Math.round(step / 2 + (this.random() * step) / 2);
  }

  reset(): void {
    this.attempt = 0;
  }
}

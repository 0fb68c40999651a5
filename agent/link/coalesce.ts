/**
 * Coalesces a completion's text pieces into fewer wire messages. The first piece goes out at once
 * (time to first token is what a user feels); later ones are gathered for at most `intervalMs` and
 * sent together. A small model generates thousands of tokens a second, and a message per token then
 * costs the agent, the scheduler and the client more CPU than the generation itself; at 10 ms a
 * stream sends at most 100 messages a second whatever the model's speed.
 */
export class ChunkCoalescer {
  private pending = "";
  private timer: NodeJS.Timeout | undefined;
  private last = -Infinity;

  /**
   * @param send receives each coalesced piece, in order.
   * @param intervalMs the longest a piece waits; 0 sends every piece as it comes.
   */
  constructor(private readonly send: (text: string) => void, private readonly intervalMs: number) {}

  push(text: string): void {
    if (!text) return;
    this.pending += text;
    if (this.timer) return;
    const wait = this.last + this.intervalMs - performance.now();
    if (wait <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Sends what is pending now (before the final message of a stream). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.pending) return;
    const text = this.pending;
    this.pending = "";
    this.last = performance.now();
    this.send(text);
  }

  /** Drops what is pending (the stream failed or was cancelled). */
  discard(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = "";
  }
}

/**
 * A single-consumer async queue: the producer pushes events, ends or fails it; the consumer
 * iterates with `for await`. Breaking out of the loop runs `onReturn` (used to cancel upstream).
 */
export class Channel<T> implements AsyncIterable<T> {
  private readonly buffered: T[] = [];
  private waiting: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | undefined;
  private ended = false;
  private failure: unknown;

  constructor(private readonly onReturn: () => void = () => undefined) {}

  get closed(): boolean {
    return this.ended;
  }

  push(value: T): void {
    if (this.ended) return;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = undefined;
      w.resolve({ value, done: false });
    } else this.buffered.push(value);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = undefined;
      w.resolve({ value: undefined, done: true });
    }
  }

  fail(error: unknown): void {
    if (this.ended) return;
    this.failure = error;
    this.ended = true;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = undefined;
      w.reject(error);
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const value = this.buffered.shift();
        if (value !== undefined) return Promise.resolve({ value, done: false });
        if (this.ended) return this.failure === undefined ? Promise.resolve({ value: undefined, done: true }) : Promise.reject(this.failure);
        return new Promise((resolve, reject) => {
          this.waiting = { resolve, reject };
        });
      },
      return: () => {
        if (!this.ended) {
          this.ended = true;
          this.onReturn();
        }
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

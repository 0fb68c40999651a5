/**
 * Per-key requests-per-minute limits: a fixed one-minute window per key, opened by the key's
 * first request. In memory: limits are per scheduler process.
 */
import { RateLimitError } from "../../core/errors.js";

const WINDOW_MS = 60_000;

export interface RateDecision {
  limit: number;
  remaining: number;
  /** Milliseconds until the window resets. */
  resetMs: number;
}

export class RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  private lastSweep = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** Counts one request for `key`; throws `RateLimitError` (with the decision) when the limit is spent. */
  hit(key: string, limit: number): RateDecision {
    const now = this.now();
    this.sweep(now);
    let w = this.windows.get(key);
    if (!w || now - w.start >= WINDOW_MS) {
      w = { start: now, count: 0 };
      this.windows.set(key, w);
    }
    const resetMs = w.start + WINDOW_MS - now;
    if (w.count >= limit) {
      const err = new RateLimitError(`rate limit: ${limit} requests per minute for this key; retry in ${Math.ceil(resetMs / 1000)} s`, Math.max(1, Math.ceil(resetMs / 1000)));
      Object.assign(err.headers, rateHeaders({ limit, remaining: 0, resetMs }));
      throw err;
    }
    w.count++;
    return { limit, remaining: limit - w.count, resetMs };
  }

  /** Drops finished windows now and then so idle keys do not accumulate. */
  private sweep(now: number): void {
    if (now - this.lastSweep < WINDOW_MS) return;
    this.lastSweep = now;
    for (const [key, w] of this.windows) if (now - w.start >= WINDOW_MS) this.windows.delete(key);
  }
}

/** The `x-ratelimit-*` headers (OpenAI's names; reset as a duration like `42s`). */
export function rateHeaders(d: RateDecision): Record<string, string> {
  return {
    "x-ratelimit-limit-requests": String(d.limit),
    "x-ratelimit-remaining-requests": String(d.remaining),
    "x-ratelimit-reset-requests": `${Math.ceil(d.resetMs / 1000)}s`,
  };
}

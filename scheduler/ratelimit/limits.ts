/**
 * Fair use per account (never per key: an account's extra keys share its limits).
 *
 * - `RateLimiter`: requests per minute as an exact sliding window. Each account keeps a ring of
 *   the times of its requests accepted in the last 60 s (at most `limit` of them); a request is
 *   accepted when fewer than `limit` are, that is when the `limit`th latest is at least 60 s old,
 *   so no 60 s window ever holds more than `limit` requests (a fixed window lets 2× through around
 *   its edge). A limit that changes (the account's tier did) applies at once and resizes the ring.
 *   Idle accounts are swept.
 * - `InflightLimiter`: a cap on an account's requests in flight (queued or generating).
 * - `TokenQuota` (`./tokens.ts`): tokens per minute and per day.
 *
 * In memory: limits are per scheduler process; with `--redis`, `RedisLimits` (`./redis.ts`) keeps
 * the same counts in Redis, shared by every scheduler.
 */
import { InFlightLimitError, RateLimitError } from "../../core/errors.js";

/** The sliding window: 60 s. */
export const WINDOW_MS = 60_000;
/** A ring starts this small and doubles up to its limit, so a large limit costs memory only when used. */
const INITIAL_CAPACITY = 16;

export interface RateDecision {
  limit: number;
  /** Requests the account may still send in the current 60 s window. */
  remaining: number;
  /**
   * Milliseconds until the oldest request counted in the window leaves it, when `remaining` goes
   * up by one; with `remaining` 0, how long until the next request is accepted.
   */
  resetMs: number;
}

/**
 * The times of an account's requests accepted in the last 60 s, oldest first, in a ring that
 * grows by doubling up to the account's limit. Times leave from the front as they leave the
 * window. After a lower limit (a tier change) the ring still holds every request of the window,
 * so a limit raised again soon after still counts them; its storage shrinks once they have left.
 */
class Ring {
  private times: Float64Array;
  private start = 0;
  count = 0;

  constructor(limit: number) {
    this.times = new Float64Array(Math.min(limit, INITIAL_CAPACITY));
  }

  get capacity(): number {
    return this.times.length;
  }

  /** The `i`th time, oldest first. */
  at(i: number): number {
    return this.times[(this.start + i) % this.times.length]!;
  }

  /** Forgets the times at or before `t`: they have left the window. */
  expire(t: number): void {
    while (this.count > 0 && this.times[this.start]! <= t) {
      this.start = (this.start + 1) % this.times.length;
      this.count--;
    }
  }

  /** Adds the newest time; the caller has checked that fewer than `limit` are held. */
  push(t: number, limit: number): void {
    if (this.count === this.times.length) this.relayout(Math.max(this.count + 1, Math.min(limit, this.times.length * 2)));
    this.times[(this.start + this.count) % this.times.length] = t;
    this.count++;
  }

  /** Gives back the storage of a higher limit than `limit` (a tier change) once its extra times have left the window. */
  fit(limit: number): void {
    if (this.times.length > limit && this.count <= limit) this.relayout(Math.max(this.count, Math.min(limit, INITIAL_CAPACITY)));
  }

  private relayout(capacity: number): void {
    const times = new Float64Array(capacity);
    for (let i = 0; i < this.count; i++) times[i] = this.at(i);
    this.times = times;
    this.start = 0;
  }
}

/** Counts an account's requests against its per-minute limit: in this process, or shared in Redis (`./redis.ts`). */
export interface RequestLimiter {
  /** Counts one request, or throws `RateLimitError` (429 with `Retry-After` and `x-ratelimit-*`); a refused one is not counted. */
  hit(account: string, limit: number): RateDecision | Promise<RateDecision>;
}

/** Requests per minute per account, as an exact sliding 60 s window. */
export class RateLimiter implements RequestLimiter {
  private readonly rings = new Map<string, Ring>();
  private lastSweep: number;

  /** @param now a monotonic clock in ms (default `performance.now`); tests inject their own. */
  constructor(private readonly now: () => number = () => performance.now()) {
    this.lastSweep = now();
  }

  /**
   * Counts one request for `account` against `limit` requests in any 60 s window (the account's
   * current figure: a changed one applies at once). Throws `RateLimitError` (429, with
   * `Retry-After` and the `x-ratelimit-*` headers) when the window is full; a refused request is
   * not counted.
   */
  hit(account: string, limit: number): RateDecision {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`rate limit: expected a whole number of at least 1, got ${limit}`);
    const now = this.now();
    this.sweep(now);
    let ring = this.rings.get(account);
    if (!ring) this.rings.set(account, (ring = new Ring(limit)));
    ring.expire(now - WINDOW_MS);
    ring.fit(limit);
    if (ring.count >= limit) {
      // Accepted again once all but `limit - 1` of the window's requests have left it.
      const resetMs = ring.at(ring.count - limit) + WINDOW_MS - now;
      const seconds = Math.max(1, Math.ceil(resetMs / 1000));
      const err = new RateLimitError(`rate limit: ${limit} requests per minute for this account; retry in ${seconds} s`, seconds);
      Object.assign(err.headers, rateHeaders({ limit, remaining: 0, resetMs }));
      throw err;
    }
    ring.push(now, limit);
    return { limit, remaining: limit - ring.count, resetMs: ring.at(0) + WINDOW_MS - now };
  }

  /** Accounts with a ring (for tests and metrics). */
  get accounts(): number {
    return this.rings.size;
  }

  /** Request times an account's ring has room for (for tests and metrics: what an account costs). */
  storageOf(account: string): number {
    return this.rings.get(account)?.capacity ?? 0;
  }

  /** Now and then, forgets accounts with no request in the last 60 s, so idle accounts cost nothing. */
  private sweep(now: number): void {
    if (now - this.lastSweep < WINDOW_MS) return;
    this.lastSweep = now;
    for (const [account, ring] of this.rings) {
      ring.expire(now - WINDOW_MS);
      if (ring.count === 0) this.rings.delete(account);
    }
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

/** What a chat completion beyond its account's cap is told. */
export const CHAT_INFLIGHT_REFUSAL = (limit: number): string =>
  `requests in flight: this account may have at most ${limit} chat completions in flight (queued or generating) at once; retry when one finishes`;

/** Counts an account's requests in flight against a cap: in this process, or shared in Redis (`./redis.ts`). */
export interface InflightCounter {
  /**
   * Takes one of `limit` places for `account`, or throws `InFlightLimitError` (429
   * `too_many_requests_in_flight`, with the message `refusal` gives; default: a chat completion's)
   * when all are taken. Returns the release, which may be called any number of times (only the
   * first counts).
   */
  acquire(account: string, limit: number, refusal?: (limit: number) => string): (() => void) | Promise<() => void>;
}

/**
 * Requests in flight per account: a chat completion takes a place when it arrives and gives it
 * back when its answer is complete or its client is gone. Accounts with none hold no memory.
 */
export class InflightLimiter implements InflightCounter {
  private readonly inflight = new Map<string, number>();
  private held = 0;

  /** Places held now, all accounts together. */
  get total(): number {
    return this.held;
  }

  acquire(account: string, limit: number, refusal: (limit: number) => string = CHAT_INFLIGHT_REFUSAL): () => void {
    const held = this.inflight.get(account) ?? 0;
    if (held >= limit) throw new InFlightLimitError(refusal(limit));
    this.inflight.set(account, held + 1);
    this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
      const left = (this.inflight.get(account) ?? 1) - 1;
      if (left > 0) this.inflight.set(account, left);
      else this.inflight.delete(account);
    };
  }

  /** The account's requests in flight now. */
  count(account: string): number {
    return this.inflight.get(account) ?? 0;
  }

  /** Accounts with a request in flight. */
  get accounts(): number {
    return this.inflight.size;
  }
}

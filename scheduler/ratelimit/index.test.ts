/** The per-account sliding-window rate limiter and in-flight cap, on an injected clock. */
import { describe, expect, it } from "vitest";
import { InflightLimiter, RateLimiter, WINDOW_MS, rateHeaders } from "./index.js";

/** A limiter on a clock the test moves by hand. */
function clocked(start = 1_000_000) {
  const clock = { t: start };
  const limiter = new RateLimiter(() => clock.t);
  const allowed = (account: string, limit: number): boolean => {
    try {
      limiter.hit(account, limit);
      return true;
    } catch {
      return false;
    }
  };
  return { clock, limiter, allowed };
}

/** Sends one request every `stepMs` from `clock.t` to `clock.t + durationMs`; returns the accepted times. */
function drive(c: ReturnType<typeof clocked>, account: string, limit: number, durationMs: number, stepMs: number): number[] {
  const accepted: number[] = [];
  const end = c.clock.t + durationMs;
  for (; c.clock.t <= end; c.clock.t += stepMs) if (c.allowed(account, limit)) accepted.push(c.clock.t);
  return accepted;
}

/** The most accepted times in any 60 s window (a window is [t, t + 60 s) for every t). */
function busiestWindow(times: number[]): number {
  let most = 0;
  for (let i = 0, j = 0; j < times.length; j++) {
    while (times[j]! - times[i]! >= WINDOW_MS) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

describe("RateLimiter (sliding window)", () => {
  it("accepts exactly `limit` in a window; the next is a 429 with Retry-After and headers", () => {
    const c = clocked();
    for (let i = 1; i <= 5; i++) {
      const d = c.limiter.hit("acme", 5);
      expect(d).toMatchObject({ limit: 5, remaining: 5 - i });
      c.clock.t += 1000;
    }
    // The first request was at t0, now is t0 + 5 s: it leaves the window 55 s from now.
    let thrown: unknown;
    try {
      c.limiter.hit("acme", 5);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({
      status: 429,
      type: "rate_limit_error",
      code: "rate_limit_exceeded",
      message: expect.stringMatching(/^rate limit: 5 requests per minute for this account; retry in 55 s$/),
    });
    expect((thrown as { headers: Record<string, string> }).headers).toEqual({
      "Retry-After": "55",
      "x-ratelimit-limit-requests": "5",
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-requests": "55s",
    });
  });

  it("never more than `limit` in any 60 s window, across the old fixed window's edge (no 2× burst)", () => {
    const c = clocked(0);
    const accepted: number[] = [];
    const burst = (t: number, tries: number): number => {
      c.clock.t = t;
      let n = 0;
      for (let i = 0; i < tries; i++)
        if (c.allowed("a", 10)) {
          accepted.push(t);
          n++;
        }
      return n;
    };
    // A fixed window opened by the request at t = 0 takes 9 more at 59.9 s, then 10 more at 60 s.
    expect(burst(0, 1)).toBe(1);
    expect(burst(59_900, 20)).toBe(9);
    expect(burst(60_000, 20)).toBe(1); // only the one at t = 0 has left the window
    expect(burst(119_899, 20)).toBe(0); // the 9 of 59.9 s are still in it
    expect(burst(119_900, 20)).toBe(9); // exactly 60 s later they have left
    expect(burst(120_000, 20)).toBe(1);
    expect(busiestWindow(accepted)).toBe(10);
  });

  it("a steady flood gets exactly `limit` per window, in every window", () => {
    const c = clocked();
    const accepted = drive(c, "flood", 7, 5 * WINDOW_MS, 250); // 4 requests/s for 5 minutes
    expect(busiestWindow(accepted)).toBe(7);
    expect(accepted.length).toBe(7 * 5 + 1); // 7 at the start of each of the 5 minutes, and 1 more at t = 300 s, the last step
  });

  it("irregular traffic never exceeds the limit in any window and is never refused below it", () => {
    const c = clocked();
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const accepted: number[] = [];
    for (let i = 0; i < 5000; i++) {
      c.clock.t += Math.floor(random() * 400);
      const inWindow = accepted.filter((t) => t > c.clock.t - WINDOW_MS).length;
      const ok = c.allowed("x", 20);
      expect(ok).toBe(inWindow < 20); // exact: refused only when 20 were accepted in the last 60 s
      if (ok) accepted.push(c.clock.t);
    }
    expect(busiestWindow(accepted)).toBe(20);
  });

  it("remaining and reset come from the window: reset is when the oldest counted request leaves it", () => {
    const c = clocked(0);
    expect(c.limiter.hit("a", 3)).toEqual({ limit: 3, remaining: 2, resetMs: 60_000 });
    c.clock.t = 20_000;
    expect(c.limiter.hit("a", 3)).toEqual({ limit: 3, remaining: 1, resetMs: 40_000 });
    c.clock.t = 70_000; // the first has left the window
    expect(c.limiter.hit("a", 3)).toEqual({ limit: 3, remaining: 1, resetMs: 10_000 });
    expect(rateHeaders({ limit: 3, remaining: 1, resetMs: 10_000 })).toEqual({
      "x-ratelimit-limit-requests": "3",
      "x-ratelimit-remaining-requests": "1",
      "x-ratelimit-reset-requests": "10s",
    });
  });

  it("counts per account: accounts do not share a window", () => {
    const c = clocked();
    for (let i = 0; i < 3; i++) expect(c.allowed("a", 3)).toBe(true);
    expect(c.allowed("a", 3)).toBe(false);
    expect(c.allowed("b", 3)).toBe(true);
  });

  it("a lower limit (tier change) applies at once, keeping the newest requests", () => {
    const c = clocked(0);
    for (let i = 0; i < 10; i++) {
      expect(c.allowed("a", 100)).toBe(true);
      c.clock.t += 1000;
    } // at 0..9 s
    expect(c.allowed("a", 5)).toBe(false); // 10 in the window, the new limit is 5
    c.clock.t = 64_999; // 0..4 s have left the window; 5..9 s are still in it
    expect(c.allowed("a", 5)).toBe(false);
    c.clock.t = 65_000; // the one at 5 s leaves
    expect(c.limiter.hit("a", 5)).toMatchObject({ remaining: 0 });
    expect(c.allowed("a", 5)).toBe(false);
  });

  it("a higher limit (tier change) applies at once, the window's requests still counted", () => {
    const c = clocked(0);
    for (let i = 0; i < 3; i++) expect(c.allowed("a", 3)).toBe(true);
    expect(c.allowed("a", 3)).toBe(false);
    expect(c.limiter.hit("a", 50)).toMatchObject({ limit: 50, remaining: 46 });
    for (let i = 0; i < 46; i++) expect(c.allowed("a", 50)).toBe(true);
    expect(c.allowed("a", 50)).toBe(false);
    c.clock.t = WINDOW_MS;
    expect(c.limiter.hit("a", 50)).toMatchObject({ remaining: 49 });
  });

  it("a limit lowered then raised within a minute still counts every request of the window", () => {
    const c = clocked(0);
    for (let i = 0; i < 35; i++) expect(c.allowed("a", 40)).toBe(true);
    c.clock.t = 1000;
    expect(c.allowed("a", 2)).toBe(false);
    expect(c.allowed("a", 17)).toBe(false); // 35 are in the window: 17 is spent too
    expect(c.limiter.hit("a", 40)).toMatchObject({ remaining: 4 });
    c.clock.t = WINDOW_MS; // the 35 leave
    expect(c.limiter.hit("a", 2)).toMatchObject({ remaining: 0 });
  });

  it("resizing back and forth keeps the window exact", () => {
    const c = clocked();
    const accepted: number[] = [];
    const limits = [5, 40, 2, 17, 1, 64, 3];
    for (let i = 0; i < 3000; i++) {
      c.clock.t += 97;
      const limit = limits[Math.floor(i / 300) % limits.length]!;
      const inWindow = accepted.filter((t) => t > c.clock.t - WINDOW_MS).length;
      const ok = c.allowed("r", limit);
      expect(ok, `request ${i}, limit ${limit}, ${inWindow} in window`).toBe(inWindow < limit);
      if (ok) accepted.push(c.clock.t);
    }
  });

  it("idle accounts are forgotten", () => {
    const c = clocked();
    for (let i = 0; i < 1000; i++) c.limiter.hit(`idle-${i}`, 10);
    expect(c.limiter.accounts).toBe(1000);
    c.clock.t += WINDOW_MS + 1;
    c.limiter.hit("active", 10);
    expect(c.limiter.accounts).toBe(1);
  });

  it("refuses a limit that is not a whole number of at least 1; 1 is one", () => {
    const c = clocked();
    expect(() => c.limiter.hit("a", 0)).toThrow(new RangeError("rate limit: expected a whole number of at least 1, got 0"));
    expect(() => c.limiter.hit("a", 1.5)).toThrow(RangeError);
    expect(c.limiter.hit("a", 1)).toEqual({ limit: 1, remaining: 0, resetMs: WINDOW_MS });
    expect(c.allowed("a", 1)).toBe(false);
  });

  it("after a lower limit, a refusal says when enough of the window has left: not before the (count − limit + 1)th oldest goes", () => {
    const c = clocked(0);
    for (let i = 0; i < 10; i++) {
      expect(c.allowed("a", 100)).toBe(true);
      c.clock.t += 1000;
    } // at 0..9 s, now 10 s
    let refusal: { headers: Record<string, string>; retryAfterSeconds: number } | undefined;
    try {
      c.limiter.hit("a", 4);
    } catch (err) {
      refusal = err as typeof refusal;
    }
    // 10 in the window, limit 4: accepted again once 7 have left, when the one at 6 s leaves (66 s): 56 s from now.
    expect(refusal!.retryAfterSeconds).toBe(56);
    expect(refusal!.headers["x-ratelimit-reset-requests"]).toBe("56s");
  });

  it("idle accounts are forgotten once a minute, not at every request", () => {
    const c = clocked(0);
    c.clock.t = 30_000;
    c.limiter.hit("early", 10);
    c.clock.t = WINDOW_MS; // a minute since the start: a sweep, but "early" is still in its window
    c.limiter.hit("late", 10);
    expect(c.limiter.accounts).toBe(2);
    c.clock.t = 90_001; // "early" has left its window, but the last sweep was 30 s ago: kept for now
    c.limiter.hit("late", 10);
    expect(c.limiter.accounts).toBe(2);
    c.clock.t = 2 * WINDOW_MS; // a minute since the last sweep: forgotten
    c.limiter.hit("late", 10);
    expect(c.limiter.accounts).toBe(1);
  });

  it("an account's storage grows by doubling with its traffic, up to its limit, and shrinks after a lower limit", () => {
    const c = clocked(0);
    c.limiter.hit("a", 10_000);
    const initial = c.limiter.storageOf("a");
    expect(initial).toBeGreaterThan(0);
    expect(initial).toBeLessThan(10_000); // not the whole limit up front
    for (let i = 1; i < initial; i++) c.limiter.hit("a", 10_000);
    expect(c.limiter.storageOf("a")).toBe(initial); // full, not grown yet
    c.limiter.hit("a", 10_000);
    expect(c.limiter.storageOf("a")).toBe(initial * 2); // doubled
    expect(c.limiter.storageOf("small")).toBe(0);
    c.limiter.hit("small", 3);
    expect(c.limiter.storageOf("small")).toBe(3); // never more than the limit
    c.clock.t = WINDOW_MS + 1; // the window empties; a lower limit gives the storage back
    c.limiter.hit("a", 5);
    expect(c.limiter.storageOf("a")).toBe(5);
  });

  it("a lower limit gives the storage back once the window holds no more than it, down to the limit or 16", () => {
    const c = clocked(0);
    for (let i = 0; i < 17; i++) c.limiter.hit("a", 100);
    expect(c.limiter.storageOf("a")).toBe(32);
    c.clock.t = 30_000;
    c.limiter.hit("a", 100); // keeps the account in the window: no sweep forgets it
    c.clock.t = 60_500; // the 17 of t = 0 have left; one request remains
    expect(c.limiter.hit("a", 5)).toMatchObject({ remaining: 3 });
    expect(c.limiter.storageOf("a")).toBe(5);
    c.clock.t = 91_000; // another account: exactly at its new limit, the storage shrinks to it
    for (let i = 0; i < 17; i++) c.limiter.hit("b", 100);
    c.clock.t = 92_000;
    expect(c.allowed("b", 17)).toBe(false); // 17 in the window: exactly the new limit
    expect(c.limiter.storageOf("b")).toBe(17);
  });

  it("a lower limit keeps the storage while the window still holds more requests than it", () => {
    const c = clocked(0);
    for (let i = 0; i < 35; i++) c.limiter.hit("a", 40);
    expect(c.limiter.storageOf("a")).toBe(40); // 16, 32, then the limit
    c.clock.t = 1000;
    expect(c.allowed("a", 2)).toBe(false);
    expect(c.limiter.storageOf("a")).toBe(40);
  });

  it("an unchanged limit never shrinks the storage as requests leave the window", () => {
    const c = clocked(0);
    for (let i = 0; i < 16; i++) c.limiter.hit("a", 32);
    c.clock.t = 30_000;
    c.limiter.hit("a", 32);
    expect(c.limiter.storageOf("a")).toBe(32);
    c.clock.t = 61_000; // 16 have left, one is left
    expect(c.limiter.hit("a", 32)).toMatchObject({ remaining: 30 });
    expect(c.limiter.storageOf("a")).toBe(32);
  });

  it("runs on performance.now by default", () => {
    expect(new RateLimiter().hit("a", 1)).toEqual({ limit: 1, remaining: 0, resetMs: WINDOW_MS });
  });
});

describe("InflightLimiter", () => {
  it("holds `limit` places per account; the next is a 429 too_many_requests_in_flight naming the limit", () => {
    const l = new InflightLimiter();
    const releases = [l.acquire("a", 2), l.acquire("a", 2)];
    expect(() => l.acquire("a", 2)).toThrow(
      expect.objectContaining({ status: 429, type: "rate_limit_error", code: "too_many_requests_in_flight", message: expect.stringContaining("at most 2") }),
    );
    expect(l.acquire("b", 2)).toBeTypeOf("function"); // another account is unaffected
    releases[0]!();
    releases[0]!(); // a second release of the same place counts for nothing
    expect(l.count("a")).toBe(1);
    l.acquire("a", 2);
    expect(() => l.acquire("a", 2)).toThrow(/at most 2/);
  });

  it("counts the places held by all accounts together", () => {
    const l = new InflightLimiter();
    expect(l.total).toBe(0);
    const [a, b] = [l.acquire("a", 2), l.acquire("b", 2)];
    l.acquire("a", 2);
    expect(l.total).toBe(3);
    a();
    a();
    expect(l.total).toBe(2);
    b();
    expect(l.total).toBe(1);
  });

  it("accounts with nothing in flight hold no memory", () => {
    const l = new InflightLimiter();
    const releases = Array.from({ length: 100 }, (_, i) => l.acquire(`acct-${i}`, 1));
    expect(l.accounts).toBe(100);
    for (const r of releases) r();
    expect(l.accounts).toBe(0);
  });
});

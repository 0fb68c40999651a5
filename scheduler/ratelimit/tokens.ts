/**
 * Token quotas per account, by tier: tokens (prompt and completion) in any 60 s, and per UTC day.
 *
 * A request is admitted while the account has tokens left in both; what it then uses is counted
 * when its answer is complete (the usage ledger tells), so the request that crosses a quota is
 * served whole and the next one is refused (429 `token_quota_exceeded`, with `Retry-After`). The
 * minute is a sliding window kept in memory; the day is seeded from the ledger the first time an
 * account is seen that day, so a restarted scheduler forgets none of it. A quota of 0 is none.
 */
import { RateLimitError } from "../../core/errors.js";
import type { Tier } from "../auth/index.js";
import { WINDOW_MS } from "./index.js";

export interface TokenQuotaOptions {
  perMinute: Readonly<Record<Tier, number>>;
  perDay: Readonly<Record<Tier, number>>;
  /** Tokens `account` has used on `day` (UTC `YYYY-MM-DD`) so far, from the ledger. */
  usedOn: (account: string, day: string) => number | Promise<number>;
  /** Wall clock, Unix ms: the UTC day (tests inject their own). Default `Date.now`. */
  now?: () => number;
  /** A monotonic clock in ms: the 60 s window (a wall clock stepped by NTP would bend it). Default `performance.now`. */
  monotonic?: () => number;
}

const DAY_MS = 86_400_000;

export class TokenQuota {
  /** Each account's counted tokens of the last 60 s, oldest first, with their sum. */
  private readonly minute = new Map<string, { entries: { at: number; tokens: number }[]; sum: number }>();
  /** Tokens held for each account's requests being answered (their max_tokens and prompt estimates). */
  private readonly reserved = new Map<string, number>();
  /** Each account's tokens of its current UTC day. */
  private readonly day = new Map<string, { day: string; used: number }>();
  /** Accounts whose day is being read from the ledger (requests arriving meanwhile share the read). */
  private readonly seeding = new Map<string, Promise<void>>();
  private readonly now: () => number;
  private readonly monotonic: () => number;
  /** The UTC day `day` counts; a new day starts every count again. */
  private currentDay = "";
  private lastSweep = 0;

  constructor(private readonly options: TokenQuotaOptions) {
    this.now = options.now ?? Date.now;
    this.monotonic = options.monotonic ?? (() => performance.now());
  }

  /**
   * Admits a request of `account` (its current `tier`) or throws the 429; returns the
   * `x-ratelimit-*-tokens` headers of the quotas that apply.
   */
  async check(account: string, tier: Tier): Promise<Record<string, string>> {
    if (this.options.perDay[tier] > 0) await this.seed(account);
    const headers: Record<string, string> = {};
    const spent: { what: string; waitMs: number }[] = [];
    const perMinute = this.options.perMinute[tier];
    if (perMinute > 0) {
      const now = this.monotonic();
      const window = this.window(account, now);
      const used = window.sum + (this.reserved.get(account) ?? 0);
      let resetMs = window.entries.length ? window.entries[0]!.at + WINDOW_MS - now : 0;
      if (used >= perMinute) {
        // admitted again once enough of the window's tokens have left it
        let left = window.sum;
        for (const e of window.entries) {
          left -= e.tokens;
          resetMs = e.at + WINDOW_MS - now;
          if (left < perMinute) break;
        }
        spent.push({ what: `${used} of its ${perMinute} tokens per minute`, waitMs: Math.max(resetMs, 1000) });
      }
      Object.assign(headers, tokenHeaders({ limit: perMinute, remaining: perMinute - used, resetMs }, ""));
    }
    const perDay = this.options.perDay[tier];
    if (perDay > 0) {
      const now = this.now();
      const used = this.today(account, now).used + (this.reserved.get(account) ?? 0);
      const resetMs = DAY_MS - (now % DAY_MS);
      if (used >= perDay) spent.push({ what: `${used} of its ${perDay} tokens for today (UTC)`, waitMs: resetMs });
      Object.assign(headers, tokenHeaders({ limit: perDay, remaining: perDay - used, resetMs }, "-day"));
    }
    if (spent.length > 0) {
      // the longest wait: a client told to come back in seconds while its day is spent would only be refused again
      const waitMs = Math.max(...spent.map((s) => s.waitMs));
      const seconds = Math.max(1, Math.ceil(waitMs / 1000));
      const err = new RateLimitError(`tokens: this account used ${spent.map((s) => s.what).join(" and ")}; retry in ${seconds} s`, seconds, "token_quota_exceeded");
      Object.assign(err.headers, headers);
      throw err;
    }
    return headers;
  }

  /**
   * Holds `tokens` of the account's quotas while a request is answered (its max_tokens and an
   * estimate of its prompt), so that requests sent at once cannot all pass a nearly spent quota;
   * throws the 429 when they do not fit. The returned function gives them back (once), when the
   * request has ended: what it really used is counted by `add`.
   */
  async reserve(account: string, tier: Tier, tokens: number): Promise<() => void> {
    const perMinute = this.options.perMinute[tier];
    const perDay = this.options.perDay[tier];
    if (tokens <= 0 || (perMinute === 0 && perDay === 0)) return () => undefined;
    if (perDay > 0) await this.seed(account);
    const held = this.reserved.get(account) ?? 0;
    const fits = (limit: number, used: number) => limit === 0 || used + held + tokens <= limit;
    const minuteUsed = perMinute > 0 ? this.window(account, this.monotonic()).sum : 0;
    const dayUsed = perDay > 0 ? this.today(account, this.now()).used : 0;
    if (!fits(perMinute, minuteUsed) || !fits(perDay, dayUsed)) {
      const limit = !fits(perMinute, minuteUsed) ? `${perMinute} tokens per minute` : `${perDay} tokens for today (UTC)`;
      const waitMs = !fits(perMinute, minuteUsed) ? WINDOW_MS : DAY_MS - (this.now() % DAY_MS);
      throw new RateLimitError(`max_tokens: this request may use about ${tokens} tokens (its max_tokens and prompt), which the account's ${limit} cannot hold now (${held} held by its requests in flight); lower max_tokens or retry later`, Math.ceil(waitMs / 1000), "token_quota_exceeded");
    }
    this.reserved.set(account, held + tokens);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.reserved.get(account) ?? tokens) - tokens;
      if (left > 0) this.reserved.set(account, left);
      else this.reserved.delete(account);
    };
  }

  /**
   * Counts `tokens` an answered request of `account` used. The day's count moves only when this
   * scheduler has it (its quota's check seeded it from the ledger, which holds this row too once the
   * day has turned): counting never reads the ledger, and tiers without a quota cost nothing here.
   */
  add(account: string, tokens: number): void {
    if (tokens <= 0) return;
    const now = this.monotonic();
    const window = this.window(account, now);
    window.entries.push({ at: now, tokens });
    window.sum += tokens;
    const today = this.day.get(account);
    if (today && today.day === this.currentDay && this.currentDay === new Date(this.now()).toISOString().slice(0, 10)) today.used += tokens;
  }

  /** The account's window with the tokens older than 60 s gone (accounts with none hold no memory). */
  private window(account: string, now: number): { entries: { at: number; tokens: number }[]; sum: number } {
    let w = this.minute.get(account);
    if (!w) this.minute.set(account, w = { entries: [], sum: 0 });
    while (w.entries.length && w.entries[0]!.at <= now - WINDOW_MS) w.sum -= w.entries.shift()!.tokens;
    if (now - this.lastSweep > WINDOW_MS) {
      // once a minute: accounts whose tokens have all left the window are forgotten
      this.lastSweep = now;
      for (const [a, other] of this.minute) if (a !== account && other.entries.every((e) => e.at <= now - WINDOW_MS)) this.minute.delete(a);
    }
    return w;
  }

  /** Reads the account's count for the current UTC day from the ledger, unless this scheduler has it. */
  private async seed(account: string): Promise<void> {
    const day = new Date(this.now()).toISOString().slice(0, 10);
    if (this.day.get(account)?.day === day && day === this.currentDay) return;
    let pending = this.seeding.get(account);
    if (!pending) {
      pending = Promise.resolve(this.options.usedOn(account, day)).then((used) => {
        this.turn(day);
        // (an answer completed in the few ms the read takes may be missing from both: the day's count is that close)
        this.day.set(account, { day, used });
      }).finally(() => this.seeding.delete(account));
      this.seeding.set(account, pending);
    }
    await pending;
  }

  /** Starts a new UTC day's counts when `day` is not the one counted. */
  private turn(day: string): void {
    if (day === this.currentDay) return;
    this.day.clear(); // yesterday's counts go
    this.currentDay = day;
  }

  /** The account's count for the current UTC day (seeded by `seed`; zero when the day turned since). */
  private today(account: string, now: number): { day: string; used: number } {
    const day = new Date(now).toISOString().slice(0, 10);
    this.turn(day);
    let d = this.day.get(account);
    if (!d) this.day.set(account, d = { day, used: 0 });
    return d;
  }
}

interface TokenDecision { limit: number; remaining: number; resetMs: number }

/** OpenAI's `x-ratelimit-*-tokens` headers (`suffix` "-day" for the daily quota). */
function tokenHeaders(d: TokenDecision, suffix: string): Record<string, string> {
  return {
    [`x-ratelimit-limit-tokens${suffix}`]: String(d.limit),
    [`x-ratelimit-remaining-tokens${suffix}`]: String(Math.max(0, d.remaining)),
    [`x-ratelimit-reset-tokens${suffix}`]: `${Math.max(0, Math.ceil(d.resetMs / 1000))}s`,
  };
}


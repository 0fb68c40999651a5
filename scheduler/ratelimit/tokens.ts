/**
 * Token quotas per account, by tier: tokens (prompt and completion) in any 60 s, and per UTC day.
 *
 * A request is admitted while the account has tokens left in both; what it then uses is counted
 * when its answer is complete (the usage ledger tells), so the request that crosses a quota is
 * served whole and the next one is refused (429 `token_quota_exceeded`, with `Retry-After`). While
 * it runs, a request holds what it may use (its max_tokens and a prompt estimate), so requests sent
 * at once cannot all pass a nearly spent quota. A quota of 0 is none.
 *
 * `TokenQuota` decides and words the answers; a `TokenCounter` keeps the counts: in this process
 * (`MemoryTokenCounter`), or in Redis, shared by every scheduler (`RedisLimits`, `./redis.ts`).
 * Either seeds an account's day from the ledger the first time it is counted, so a restarted
 * scheduler (or Redis) forgets none of it.
 */
import { RateLimitError } from "../../core/errors.js";
import type { Tier } from "../auth/index.js";
import { WINDOW_MS } from "./limits.js";
import type { ErrorCode } from "../../core/error-codes.js";

/** An account's counts now. */
export interface TokenUsage {
  /** Tokens counted in the last 60 s. */
  minute: number;
  /**
   * Milliseconds until the window admits again: with `minute` at or over the limit asked about,
   * until enough tokens have left it; otherwise until its oldest tokens leave (0 when empty).
   */
  minuteResetMs: number;
  /** Tokens counted on the current UTC day (0 when no day was asked for). */
  day: number;
  /** Tokens held by the account's requests being answered. */
  held: number;
}

/** Which quota a hold did not fit, and the tokens held then. */
export interface HoldRefused {
  full: "minute" | "day";
  held: number;
}

/** Where the counts live. */
export interface TokenCounter {
  /** `account`'s counts; `perMinute` words `minuteResetMs`; `day` (UTC `YYYY-MM-DD`): the day to count, none for no daily quota. */
  usage(account: string, perMinute: number, day: string | undefined): Promise<TokenUsage>;
  /** Holds `tokens` when they fit both quotas (0: none) with what is counted and held, in one step; else says which did not. */
  hold(account: string, tokens: number, quota: { perMinute: number; perDay: number; day: string }): Promise<{ release: () => void } | HoldRefused>;
  /** Counts `tokens` an answered request used. */
  add(account: string, tokens: number): void;
}

/** What a quota counts, as its answers word it. */
export interface QuotaUnit {
  /** The field a refusal's message starts with. */
  field: string;
  /** What is counted, plural (`tokens`, `audio seconds`). */
  noun: string;
  /** A refusal's code. */
  code: ErrorCode;
  /** The `x-ratelimit-*-<header>` headers' last word (`tokens`, `audio-seconds`). */
  header: string;
}

/** Tokens (prompt and completion): the default unit. */
export const TOKENS: QuotaUnit = { field: "tokens", noun: "tokens", code: "token_quota_exceeded", header: "tokens" };
/** Seconds of audio transcribed (`/v1/audio`, counted as the usage ledger charged them). */
export const AUDIO_SECONDS: QuotaUnit = { field: "file", noun: "audio seconds", code: "audio_quota_exceeded", header: "audio-seconds" };

export interface TokenQuotaOptions {
  /** What is counted. Default `TOKENS`. */
  unit?: QuotaUnit;
  perMinute: Readonly<Record<Tier, number>>;
  perDay: Readonly<Record<Tier, number>>;
  /** The counts. */
  counter: TokenCounter;
  /** Wall clock, Unix ms: the UTC day (tests inject their own). Default `Date.now`. */
  now?: () => number;
}

const DAY_MS = 86_400_000;

/** The UTC day of a Unix-ms time, `YYYY-MM-DD`. */
const utcDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

export class TokenQuota {
  private readonly now: () => number;
  private readonly unit: QuotaUnit;
  /** Whether any tier has a quota. */
  private readonly any: boolean;

  constructor(private readonly options: TokenQuotaOptions) {
    this.now = options.now ?? Date.now;
    this.unit = options.unit ?? TOKENS;
    this.any = [...Object.values(options.perMinute), ...Object.values(options.perDay)].some((n) => n > 0);
  }

  /** Whether `tier` has a quota (per minute or per day): `check` has nothing to do for one without. */
  applies(tier: Tier): boolean {
    return this.options.perMinute[tier] > 0 || this.options.perDay[tier] > 0;
  }

  /**
   * Admits a request of `account` (its current `tier`) or throws the 429; returns the
   * `x-ratelimit-*-tokens` headers (the unit's) of the quotas that apply.
   */
  async check(account: string, tier: Tier): Promise<Record<string, string>> {
    if (!this.applies(tier)) return {};
    const perMinute = this.options.perMinute[tier];
    const perDay = this.options.perDay[tier];
    const now = this.now();
    const used = await this.options.counter.usage(account, perMinute, perDay > 0 ? utcDay(now) : undefined);
    const headers: Record<string, string> = {};
    const spent: { what: string; waitMs: number }[] = [];
    const { noun, header } = this.unit;
    if (perMinute > 0) {
      const count = used.minute + used.held;
      if (count >= perMinute) spent.push({ what: `${count} of its ${perMinute} ${noun} per minute`, waitMs: Math.max(used.minuteResetMs, 1000) });
      Object.assign(headers, tokenHeaders({ limit: perMinute, remaining: perMinute - count, resetMs: used.minuteResetMs }, header, ""));
    }
    if (perDay > 0) {
      const count = used.day + used.held;
      const resetMs = DAY_MS - (now % DAY_MS);
      if (count >= perDay) spent.push({ what: `${count} of its ${perDay} ${noun} for today (UTC)`, waitMs: resetMs });
      Object.assign(headers, tokenHeaders({ limit: perDay, remaining: perDay - count, resetMs }, header, "-day"));
    }
    if (spent.length > 0) {
      // the longest wait: a client told to come back in seconds while its day is spent would only be refused again
      const waitMs = Math.max(...spent.map((s) => s.waitMs));
      const seconds = Math.max(1, Math.ceil(waitMs / 1000));
      const err = new RateLimitError(`${this.unit.field}: this account used ${spent.map((s) => s.what).join(" and ")}; retry in ${seconds} s`, seconds, this.unit.code);
      Object.assign(err.headers, headers);
      throw err;
    }
    return headers;
  }

  /**
   * Holds `tokens` of the account's quotas while a request is answered (its max_tokens and an
   * estimate of its prompt); throws the 429 when they do not fit. The returned function gives them
   * back (once), when the request has ended: what it really used is counted by `add`.
   */
  async reserve(account: string, tier: Tier, tokens: number): Promise<() => void> {
    const perMinute = this.options.perMinute[tier];
    const perDay = this.options.perDay[tier];
    if (tokens <= 0 || (perMinute === 0 && perDay === 0)) return () => undefined;
    const now = this.now();
    const held = await this.options.counter.hold(account, tokens, { perMinute, perDay, day: utcDay(now) });
    if ("release" in held) {
      let released = false;
      return () => {
        if (released) return;
        released = true;
        held.release();
      };
    }
    const limit = held.full === "minute" ? `${perMinute} tokens per minute` : `${perDay} tokens for today (UTC)`;
    const waitMs = held.full === "minute" ? WINDOW_MS : DAY_MS - (now % DAY_MS);
    throw new RateLimitError(
      `max_tokens: this request may use about ${tokens} tokens (its max_tokens and prompt), which the account's ${limit} cannot hold now (${held.held} held by its requests in flight); lower max_tokens or retry later`,
      Math.ceil(waitMs / 1000),
      "token_quota_exceeded",
    );
  }

  /** Counts `tokens` an answered request of `account` used (nothing is counted where no tier has a quota). */
  add(account: string, tokens: number): void {
    if (tokens > 0 && this.any) this.options.counter.add(account, tokens);
  }
}

export interface MemoryTokenCounterOptions {
  /** Tokens `account` has used on `day` (UTC `YYYY-MM-DD`) so far, from the ledger. */
  usedOn: (account: string, day: string) => number | Promise<number>;
  /** Wall clock, Unix ms: the UTC day. Default `Date.now`. */
  now?: () => number;
  /** A monotonic clock in ms: the 60 s window (a wall clock stepped by NTP would bend it). Default `performance.now`. */
  monotonic?: () => number;
}

/** The counts in this process: one scheduler's. */
export class MemoryTokenCounter implements TokenCounter {
  /** Each account's counted tokens of the last 60 s, oldest first, with their sum. */
  private readonly minute = new Map<string, { entries: { at: number; tokens: number }[]; sum: number }>();
  /** Tokens held for each account's requests being answered. */
  private readonly reserved = new Map<string, number>();
  /** Each account's tokens of the UTC day `currentDay`. */
  private readonly day = new Map<string, number>();
  /** Accounts whose day is being read from the ledger (requests arriving meanwhile share the read). */
  private readonly seeding = new Map<string, Promise<void>>();
  private readonly now: () => number;
  private readonly monotonic: () => number;
  private currentDay = "";
  private lastSweep = 0;

  constructor(private readonly options: MemoryTokenCounterOptions) {
    this.now = options.now ?? Date.now;
    this.monotonic = options.monotonic ?? (() => performance.now());
  }

  async usage(account: string, perMinute: number, day: string | undefined): Promise<TokenUsage> {
    if (day !== undefined) await this.seed(account, day);
    const now = this.monotonic();
    const window = this.window(account, now);
    let resetMs = window.entries.length ? window.entries[0]!.at + WINDOW_MS - now : 0;
    const held = this.reserved.get(account) ?? 0;
    if (perMinute > 0 && window.sum + held >= perMinute) {
      // admitted again once enough of the window's tokens have left it
      let left = window.sum;
      for (const e of window.entries) {
        left -= e.tokens;
        resetMs = e.at + WINDOW_MS - now;
        if (left < perMinute) break;
      }
    }
    return { minute: window.sum, minuteResetMs: resetMs, day: day !== undefined ? (this.day.get(account) ?? 0) : 0, held };
  }

  async hold(account: string, tokens: number, quota: { perMinute: number; perDay: number; day: string }): Promise<{ release: () => void } | HoldRefused> {
    if (quota.perDay > 0) await this.seed(account, quota.day);
    const held = this.reserved.get(account) ?? 0;
    const fits = (limit: number, used: number) => limit === 0 || used + held + tokens <= limit;
    if (!fits(quota.perMinute, quota.perMinute > 0 ? this.window(account, this.monotonic()).sum : 0)) return { full: "minute", held };
    if (!fits(quota.perDay, quota.perDay > 0 ? (this.day.get(account) ?? 0) : 0)) return { full: "day", held };
    this.reserved.set(account, held + tokens);
    return {
      release: () => {
        const left = (this.reserved.get(account) ?? tokens) - tokens;
        if (left > 0) this.reserved.set(account, left);
        else this.reserved.delete(account);
      },
    };
  }

  /**
   * The day's count moves only when this scheduler has it (a check seeded it from the ledger, which
   * holds this row too once the day has turned): counting never reads the ledger.
   */
  add(account: string, tokens: number): void {
    const now = this.monotonic();
    const window = this.window(account, now);
    window.entries.push({ at: now, tokens });
    window.sum += tokens;
    const today = this.day.get(account);
    if (today !== undefined && this.currentDay === utcDay(this.now())) this.day.set(account, today + tokens);
  }

  /** The account's window with the tokens older than 60 s gone (accounts with none hold no memory). */
  private window(account: string, now: number): { entries: { at: number; tokens: number }[]; sum: number } {
    let w = this.minute.get(account);
    if (!w) this.minute.set(account, (w = { entries: [], sum: 0 }));
    while (w.entries.length && w.entries[0]!.at <= now - WINDOW_MS) w.sum -= w.entries.shift()!.tokens;
    if (now - this.lastSweep > WINDOW_MS) {
      // once a minute: accounts whose tokens have all left the window are forgotten
      this.lastSweep = now;
      for (const [a, other] of this.minute) if (a !== account && other.entries.every((e) => e.at <= now - WINDOW_MS)) this.minute.delete(a);
    }
    return w;
  }

  /** Reads the account's count for `day` from the ledger, unless this scheduler has it; a new day drops the last one's counts. */
  private async seed(account: string, day: string): Promise<void> {
    if (day !== this.currentDay) {
      this.day.clear();
      this.currentDay = day;
    }
    if (this.day.has(account)) return;
    let pending = this.seeding.get(account);
    if (!pending) {
      // (an answer completed in the few ms the read takes may be missing from both: the day's count is that close)
      pending = Promise.resolve(this.options.usedOn(account, day))
        .then((used) => {
          if (this.currentDay === day) this.day.set(account, used);
        })
        .finally(() => this.seeding.delete(account));
      this.seeding.set(account, pending);
    }
    await pending;
  }
}

interface TokenDecision {
  limit: number;
  remaining: number;
  resetMs: number;
}

/** OpenAI's `x-ratelimit-*-tokens` headers (`unit` "tokens"; `suffix` "-day" for the daily quota). */
function tokenHeaders(d: TokenDecision, unit: string, suffix: string): Record<string, string> {
  return {
    [`x-ratelimit-limit-${unit}${suffix}`]: String(d.limit),
    [`x-ratelimit-remaining-${unit}${suffix}`]: String(Math.max(0, d.remaining)),
    [`x-ratelimit-reset-${unit}${suffix}`]: `${Math.max(0, Math.ceil(d.resetMs / 1000))}s`,
  };
}

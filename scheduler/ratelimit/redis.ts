/**
 * Fair-use counts in Redis (`--redis`), so that N schedulers enforce one account's limits once:
 *
 * - requests per minute: the same exact sliding window as `RateLimiter`, a sorted set of the times
 *   of the account's accepted requests;
 * - requests in flight: a sorted set of the account's places, each a lease that its scheduler
 *   renews while the request runs, so the places of a scheduler that dies are freed within
 *   `leaseMs` rather than never;
 * - token quotas: the account's tokens per second of the last minute (a hash), its day's count, and
 *   the tokens its running requests hold (leases, as the places).
 *
 * Every decision is one Lua script (atomic across schedulers); times come from Redis's own clock
 * (`TIME`), so the schedulers' clocks need not agree.
 */
import { randomUUID } from "node:crypto";
import { Redis, ReplyError } from "ioredis";
import { InFlightLimitError, ApiError, RateLimitError, ServiceUnavailableError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { CHAT_INFLIGHT_REFUSAL, rateHeaders, WINDOW_MS, type InflightCounter, type RateDecision, type RequestLimiter } from "./limits.js";
import type { HoldRefused, TokenCounter, TokenUsage } from "./tokens.js";

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/** KEYS[1]: the account's window; ARGV: window ms, limit, a unique member. Returns {accepted (1/0), remaining, resetMs}. */
const SLIDING_WINDOW = `${NOW}
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  local nth = redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')
  return {0, 0, tonumber(nth[2]) + window - now}
end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {1, limit - count - 1, tonumber(first[2]) + window - now}
`;

/** KEYS[1]: the account's places; ARGV: lease ms, limit, a unique member. Returns 1 when a place was taken. */
const TAKE_PLACE = `${NOW}
local lease = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
redis.call('PEXPIRE', KEYS[1], lease)
return 1
`;

/** KEYS: leases' sorted sets; ARGV: lease ms, then one member per key. Pushes each lease's end (members given back are not re-added). */
const RENEW = `${NOW}
local lease = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + lease, ARGV[i + 1])
  redis.call('PEXPIRE', key, lease)
end
return 0
`;

/**
 * The shared part of the token scripts: with KEYS[1] the minute's hash (second → tokens), KEYS[3]
 * the held leases (member "<uuid>:<tokens>"), sets minute (sum of the last 60 s), oldest (its
 * oldest second) and held.
 */
const TOKEN_COUNTS = `${NOW}
local second = math.floor(now / 1000)
local minute, oldest = 0, nil
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local s = tonumber(fields[i])
  if s <= second - 60 then redis.call('HDEL', KEYS[1], fields[i])
  else
    minute = minute + tonumber(fields[i + 1])
    if oldest == nil or s < oldest then oldest = s end
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local held = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do held = held + tonumber(string.match(m, ':(%d+)$')) end
`;

/**
 * KEYS: minute hash, day count, held leases; ARGV: per-minute limit. Returns {minute, resetMs,
 * day (-1: not counted yet), held}; resetMs as `TokenUsage.minuteResetMs`.
 */
const TOKEN_USAGE = `${TOKEN_COUNTS}
local limit = tonumber(ARGV[1])
local reset = 0
if oldest ~= nil then
  reset = (oldest + 60) * 1000 - now
  if limit > 0 and minute + held >= limit then
    local left = minute
    for s = oldest, second do
      local n = tonumber(redis.call('HGET', KEYS[1], tostring(s)) or '0')
      if n > 0 then
        left = left - n
        reset = (s + 60) * 1000 - now
        if left < limit then break end
      end
    end
  end
end
local day = redis.call('GET', KEYS[2])
return {minute, math.max(0, reset), day and tonumber(day) or -1, held}
`;

/**
 * KEYS: minute hash, day count, held leases; ARGV: tokens, per-minute limit, per-day limit, lease
 * ms, a unique member. Returns {0, held} when held, {1, held} over the minute, {2, held} over the day.
 */
const TOKEN_HOLD = `${TOKEN_COUNTS}
local tokens, perMinute, perDay = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if perMinute > 0 and minute + held + tokens > perMinute then return {1, held} end
local day = tonumber(redis.call('GET', KEYS[2]) or '0')
if perDay > 0 and day + held + tokens > perDay then return {2, held} end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), ARGV[5] .. ':' .. ARGV[1])
redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[4]))
return {0, held}
`;

/**
 * KEYS: minute hash, day count; ARGV: tokens. Counts them in this second (the seconds older than the
 * window go, so the hash holds at most 61 fields), and in the day once the day is counted.
 */
const TOKEN_ADD = `${NOW}
local second = math.floor(now / 1000)
for _, s in ipairs(redis.call('HKEYS', KEYS[1])) do
  if tonumber(s) <= second - 60 then redis.call('HDEL', KEYS[1], s) end
end
redis.call('HINCRBY', KEYS[1], tostring(second), ARGV[1])
redis.call('EXPIRE', KEYS[1], 61)
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('INCRBY', KEYS[2], ARGV[1]) end
return 0
`;

/**
 * KEYS: day count; ARGV: the ledger's count, the key's lifetime (s). The first scheduler to count a
 * day creates it at 0 (answers counted from then on add to it), then adds the ledger's count; a later
 * one finds it. Returns the count. (A row both in the ledger and added meanwhile counts twice: the
 * quota errs on the strict side, by at most a flush interval's answers.)
 */
const TOKEN_SEED = `
if redis.call('SET', KEYS[1], 0, 'EX', tonumber(ARGV[2]), 'NX') then
  return redis.call('INCRBY', KEYS[1], ARGV[1])
end
return tonumber(redis.call('GET', KEYS[1]))
`;

export interface RedisLimitsOptions {
  /** `redis://[user:password@]host:port[/db]`. */
  url: string;
  /** Prefix of every key Kiln writes. Default `kiln:`. */
  prefix?: string;
  /** How long a place or a token hold outlives its scheduler's last renewal, in ms. Default 30 000. */
  leaseMs?: number;
  /** Tokens `account` has used on `day` so far, from the (shared) ledger: seeds a day Redis has not counted yet. */
  usedOn: (account: string, day: string) => number | Promise<number>;
  logger: Logger;
}

type Scripts = Redis & {
  kilnWindow(key: string, window: number, limit: number, member: string): Promise<[number, number, number]>;
  kilnTake(key: string, lease: number, limit: number, member: string): Promise<number>;
  kilnRenew(...args: (string | number)[]): Promise<number>;
  kilnTokenUsage(minute: string, day: string, held: string, perMinute: number): Promise<[number, number, number, number]>;
  kilnTokenHold(minute: string, day: string, held: string, tokens: number, perMinute: number, perDay: number, lease: number, member: string): Promise<[number, number]>;
  kilnTokenAdd(minute: string, day: string, tokens: number): Promise<number>;
  kilnTokenSeed(day: string, used: number, ttl: number): Promise<number>;
};

/**
 * A failure to reach Redis as the 503 a client is told (a shared count that cannot be read refuses
 * rather than lets everything through). Kiln's own refusals pass, and so does an error Redis
 * answered (a script's bug, a wrong server): a 500, logged, rather than a misleading "cannot be reached".
 */
function unavailable(err: unknown): never {
  if (err instanceof ApiError || err instanceof ReplyError) throw err;
  throw new ServiceUnavailableError("limits_unavailable", "the rate-limit store (Redis) cannot be reached; try again shortly");
}

/** Two days: a day's count outlives the day by one (its quota's reset is the next midnight, UTC). */
const DAY_TTL_S = 2 * 86_400;

export class RedisLimits implements RequestLimiter, InflightCounter, TokenCounter {
  private readonly redis: Scripts;
  private readonly prefix: string;
  private readonly leaseMs: number;
  /** This scheduler's leases (places and token holds) still running: key → members. */
  private readonly leases = new Map<string, Set<string>>();
  private readonly renewal: NodeJS.Timeout;

  constructor(private readonly options: RedisLimitsOptions) {
    this.prefix = options.prefix ?? "kiln:";
    this.leaseMs = options.leaseMs ?? 30_000;
    // a command whose reply was lost is not sent again after a reconnect: a place or a count would be taken twice
    this.redis = new Redis(options.url, { lazyConnect: true, maxRetriesPerRequest: 2, enableOfflineQueue: true, autoResendUnfulfilledCommands: false }) as Scripts;
    this.redis.defineCommand("kilnWindow", { numberOfKeys: 1, lua: SLIDING_WINDOW });
    this.redis.defineCommand("kilnTake", { numberOfKeys: 1, lua: TAKE_PLACE });
    this.redis.defineCommand("kilnRenew", { lua: RENEW });
    this.redis.defineCommand("kilnTokenUsage", { numberOfKeys: 3, lua: TOKEN_USAGE });
    this.redis.defineCommand("kilnTokenHold", { numberOfKeys: 3, lua: TOKEN_HOLD });
    this.redis.defineCommand("kilnTokenAdd", { numberOfKeys: 2, lua: TOKEN_ADD });
    this.redis.defineCommand("kilnTokenSeed", { numberOfKeys: 1, lua: TOKEN_SEED });
    this.redis.on("error", (err: Error) => options.logger.warn({ err: err.message }, "redis connection error"));
    this.renewal = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.renewal.unref();
  }

  /** Connects (and checks the server answers); throws when it cannot. */
  async connect(): Promise<void> {
    await this.redis.connect();
    await this.redis.ping();
  }

  async hit(account: string, limit: number): Promise<RateDecision> {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`rate limit: expected a whole number of at least 1, got ${limit}`);
    const [accepted, remaining, resetMs] = await this.redis.kilnWindow(`${this.prefix}rpm:${account}`, WINDOW_MS, limit, randomUUID()).catch(unavailable);
    if (!accepted) {
      const seconds = Math.max(1, Math.ceil(resetMs / 1000));
      const err = new RateLimitError(`rate limit: ${limit} requests per minute for this account; retry in ${seconds} s`, seconds);
      Object.assign(err.headers, rateHeaders({ limit, remaining: 0, resetMs }));
      throw err;
    }
    return { limit, remaining, resetMs };
  }

  async acquire(account: string, limit: number, refusal: (limit: number) => string = CHAT_INFLIGHT_REFUSAL): Promise<() => void> {
    const key = `${this.prefix}inflight:${account}`;
    const member = randomUUID();
    if (!(await this.redis.kilnTake(key, this.leaseMs, limit, member).catch(unavailable))) throw new InFlightLimitError(refusal(limit));
    return this.leased(key, member);
  }

  async usage(account: string, perMinute: number, day: string | undefined): Promise<TokenUsage> {
    const keys = this.tokenKeys(account, day);
    let [minute, minuteResetMs, dayCount, held] = await this.redis.kilnTokenUsage(keys.minute, keys.day, keys.held, perMinute).catch(unavailable);
    if (day !== undefined && dayCount < 0) dayCount = await this.seedDay(keys.day, account, day).catch(unavailable);
    return { minute, minuteResetMs, day: Math.max(0, dayCount), held };
  }

  async hold(account: string, tokens: number, quota: { perMinute: number; perDay: number; day: string }): Promise<{ release: () => void } | HoldRefused> {
    const keys = this.tokenKeys(account, quota.day);
    if (quota.perDay > 0 && (await this.redis.exists(keys.day).catch(unavailable)) === 0) await this.seedDay(keys.day, account, quota.day).catch(unavailable);
    const member = randomUUID();
    const [verdict, held] = await this.redis.kilnTokenHold(keys.minute, keys.day, keys.held, tokens, quota.perMinute, quota.perDay, this.leaseMs, member).catch(unavailable);
    if (verdict === 1) return { full: "minute", held };
    if (verdict === 2) return { full: "day", held };
    return { release: this.leased(keys.held, `${member}:${tokens}`) };
  }

  add(account: string, tokens: number): void {
    const keys = this.tokenKeys(account, new Date().toISOString().slice(0, 10));
    this.redis
      .kilnTokenAdd(keys.minute, keys.day, tokens)
      .catch((err: Error) => this.options.logger.warn({ err: err.message, account }, "could not count an answer's tokens in redis"));
  }

  async close(): Promise<void> {
    clearInterval(this.renewal);
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  private tokenKeys(account: string, day: string | undefined): { minute: string; day: string; held: string } {
    return { minute: `${this.prefix}tok:min:${account}`, day: `${this.prefix}tok:day:${account}:${day ?? "none"}`, held: `${this.prefix}tok:held:${account}` };
  }

  /** Seeds the day's count from the ledger when no scheduler has yet (TOKEN_SEED); returns the count. */
  private async seedDay(key: string, account: string, day: string): Promise<number> {
    const used = await this.options.usedOn(account, day);
    return this.redis.kilnTokenSeed(key, used, DAY_TTL_S);
  }

  /** Whether Redis is connected now (readiness). */
  get connected(): boolean {
    return this.redis.status === "ready";
  }

  /** Remembers a lease for renewal; returns its release (once: the member leaves the set). */
  private leased(key: string, member: string): () => void {
    let members = this.leases.get(key);
    if (!members) this.leases.set(key, (members = new Set()));
    members.add(member);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const set = this.leases.get(key);
      set?.delete(member);
      if (set?.size === 0) this.leases.delete(key);
      this.redis.zrem(key, member).catch((err: Error) => this.options.logger.warn({ err: err.message }, "could not give a place back in redis; its lease ends it"));
    };
  }

  /** Pushes back the end of every lease this scheduler holds. */
  private async renew(): Promise<void> {
    const pairs = [...this.leases].flatMap(([key, members]) => [...members].map((m) => [key, m] as const));
    for (let i = 0; i < pairs.length; i += 500) {
      const chunk = pairs.slice(i, i + 500);
      await this.redis
        .kilnRenew(chunk.length, ...chunk.map(([k]) => k), this.leaseMs, ...chunk.map(([, m]) => m))
        .catch((err: Error) => this.options.logger.warn({ err: err.message }, "could not renew leases in redis"));
    }
  }
}

/**
 * Requests per minute counted in Redis (`--redis`), so that N schedulers enforce one account's
 * limit once: the same exact sliding window as `RateLimiter`, kept as a sorted set of the times of
 * the account's accepted requests and decided in one Lua script (atomic across schedulers). Times
 * come from Redis's own clock (`TIME`), so the schedulers' clocks need not agree.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { RateLimitError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { rateHeaders, WINDOW_MS, type RateDecision, type RequestLimiter } from "./index.js";

/**
 * KEYS[1]: the account's window; ARGV: window ms, limit, a unique member. Returns
 * {accepted (1/0), remaining, resetMs}.
 */
const SLIDING_WINDOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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

export interface RedisLimitsOptions {
  /** `redis://[user:password@]host:port[/db]`. */
  url: string;
  /** Prefix of every key Kiln writes. Default `kiln:`. */
  prefix?: string;
  logger: Logger;
}

type WindowRedis = Redis & { kilnWindow(key: string, window: number, limit: number, member: string): Promise<[number, number, number]> };

export class RedisRateLimiter implements RequestLimiter {
  private readonly redis: WindowRedis;
  private readonly prefix: string;

  constructor(options: RedisLimitsOptions) {
    this.prefix = options.prefix ?? "kiln:";
    this.redis = new Redis(options.url, { lazyConnect: true, maxRetriesPerRequest: 2, enableOfflineQueue: true }) as WindowRedis;
    this.redis.defineCommand("kilnWindow", { numberOfKeys: 1, lua: SLIDING_WINDOW });
    this.redis.on("error", (err: Error) => options.logger.warn({ err: err.message }, "redis connection error"));
  }

  /** Connects (and checks the server answers); throws when it cannot. */
  async connect(): Promise<void> {
    await this.redis.connect();
    await this.redis.ping();
  }

  async hit(account: string, limit: number): Promise<RateDecision> {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`rate limit: expected a whole number of at least 1, got ${limit}`);
    const [accepted, remaining, resetMs] = await this.redis.kilnWindow(`${this.prefix}rpm:${account}`, WINDOW_MS, limit, randomUUID());
    if (!accepted) {
      const seconds = Math.max(1, Math.ceil(resetMs / 1000));
      const err = new RateLimitError(`rate limit: ${limit} requests per minute for this account; retry in ${seconds} s`, seconds);
      Object.assign(err.headers, rateHeaders({ limit, remaining: 0, resetMs }));
      throw err;
    }
    return { limit, remaining, resetMs };
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

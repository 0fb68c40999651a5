/**
 * Bearer API-key authentication, then the account's per-minute rate limit (with `x-ratelimit-*`
 * headers): counted per account, so every key of an account shares its limit, and taken from the
 * account's current tier and rpm.
 */
import type { MiddlewareHandler } from "hono";
import { requestsPerMinute, type KeyService } from "../../auth/index.js";
import { rateHeaders, type RateLimiter, type TokenQuota } from "../../ratelimit/index.js";
import type { AppEnv } from "../env.js";

export function authenticate(keys: KeyService): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    c.set("identity", await keys.authenticate(c.req.header("authorization")));
    await next();
  };
}

/** The account's token quotas (429 `token_quota_exceeded` once one is spent), with `x-ratelimit-*-tokens` headers. */
export function tokenQuota(quota: TokenQuota): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const id = c.get("identity");
    for (const [k, v] of Object.entries(quota.check(id.account, id.tier))) c.header(k, v);
    await next();
  };
}

export function rateLimit(limiter: RateLimiter, standardRpm: number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const id = c.get("identity");
    const decision = limiter.hit(id.account, requestsPerMinute(id.tier, id.rpm, standardRpm));
    for (const [k, v] of Object.entries(rateHeaders(decision))) c.header(k, v);
    await next();
  };
}

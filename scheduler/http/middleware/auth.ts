/**
 * Bearer API-key authentication, then the account's per-minute rate limit (with `x-ratelimit-*`
 * headers): counted per account, so every key of an account shares its limit, and taken from the
 * account's current tier and rpm.
 */
import type { MiddlewareHandler } from "hono";
import { requestsPerMinute, type KeyService } from "../../auth/index.js";
import { ApiError, ServiceUnavailableError } from "../../../core/errors.js";
import { rateHeaders, type RequestLimiter, type TokenQuota } from "../../ratelimit/index.js";
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
    for (const [k, v] of Object.entries(await quota.check(id.account, id.tier))) c.header(k, v);
    await next();
  };
}

export function rateLimit(limiter: RequestLimiter, standardRpm: number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const id = c.get("identity");
    const decision = await Promise.resolve(limiter.hit(id.account, requestsPerMinute(id.tier, id.rpm, standardRpm))).catch((err: unknown) => {
      // a shared counter that cannot be reached refuses rather than lets every request through
      throw err instanceof ApiError ? err : new ServiceUnavailableError("limits_unavailable", "the rate-limit store (Redis) cannot be reached; try again shortly");
    });
    for (const [k, v] of Object.entries(rateHeaders(decision))) c.header(k, v);
    await next();
  };
}

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
import { setResponseHeaders } from "../../../core/http/headers.js";

export function authenticate(keys: KeyService): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    c.set("identity", await keys.authenticate(c.req.header("authorization")));
    await next();
  };
}

/** The account's token quotas (429 `token_quota_exceeded` once one is spent), with `x-ratelimit-*-tokens` headers; nothing for a tier without any. */
export function tokenQuota(quota: TokenQuota): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const id = c.get("identity");
    if (quota.applies(id.tier)) setResponseHeaders(c, await quota.check(id.account, id.tier));
    await next();
  };
}

export function rateLimit(limiter: RequestLimiter, standardRpm: number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const id = c.get("identity");
    // the in-memory limiter decides at once (a 429 is thrown from it): no promise made for it
    const hit = limiter.hit(id.account, requestsPerMinute(id.tier, id.rpm, standardRpm));
    const decision =
      hit instanceof Promise
        ? await hit.catch((err: unknown) => {
            // a shared counter that cannot be reached refuses rather than lets every request through
            throw err instanceof ApiError ? err : new ServiceUnavailableError("limits_unavailable", "the rate-limit store (Redis) cannot be reached; try again shortly");
          })
        : hit;
    setResponseHeaders(c, rateHeaders(decision));
    await next();
  };
}

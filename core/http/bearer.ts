import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { AuthenticationError } from "../errors.js";

export interface BearerErrors {
  /** Code and message when the header is missing. */
  missing: [code: string, message: string];
  /** Code and message when the token is wrong (or the header malformed). */
  invalid: [code: string, message: string];
}

/** The token of an `Authorization: Bearer <token>` header; undefined when absent or malformed. */
export function parseBearer(header: string | undefined): string | undefined {
  return header ? /^Bearer (\S+)$/.exec(header)?.[1] : undefined;
}

/** Whether two secrets are equal, in time independent of where they differ (and of their lengths). */
export function sameSecret(given: string, expected: string): boolean {
  const digest = (s: string) => createHash("sha256").update(s).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * Requires `Authorization: Bearer <token>` equal to `token`, compared in constant time: the
 * dashboard's admin token.
 */
export function bearerToken(token: string, errors: BearerErrors): MiddlewareHandler {
  return async (c, next) => {
    const header = c.req.header("authorization");
    if (!header) throw new AuthenticationError(...errors.missing);
    if (!sameSecret(parseBearer(header) ?? "", token)) throw new AuthenticationError(...errors.invalid);
    await next();
  };
}

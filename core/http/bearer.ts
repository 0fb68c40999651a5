import { timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { AuthenticationError } from "../errors.js";

export interface BearerErrors {
  /** Code and message when the header is missing. */
  missing: [code: string, message: string];
  /** Code and message when the token is wrong (or the header malformed). */
  invalid: [code: string, message: string];
}

/**
 * Requires `Authorization: Bearer <token>` equal to `token`, compared in constant time: the
 * agent's optional API token and the dashboard's admin token.
 */
export function bearerToken(token: string, errors: BearerErrors): MiddlewareHandler {
  const expected = Buffer.from(token);
  return async (c, next) => {
    const header = c.req.header("authorization");
    if (!header) throw new AuthenticationError(...errors.missing);
    const given = Buffer.from(/^Bearer (.+)$/.exec(header)?.[1] ?? "");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new AuthenticationError(...errors.invalid);
    await next();
  };
}

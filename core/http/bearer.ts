import type { MiddlewareHandler } from "hono";
import { sameSecret } from "../digest.js";
import { AuthenticationError } from "../errors.js";
import type { ErrorCode } from "../error-codes.js";

export interface BearerErrors {
  /** Code and message when the header is missing. */
  missing: [code: ErrorCode, message: string];
  /** Code and message when the token is wrong (or the header malformed). */
  invalid: [code: ErrorCode, message: string];
}

/** The token of an `Authorization: Bearer <token>` header; undefined when absent or malformed. */
export function parseBearer(header: string | undefined): string | undefined {
  return header ? /^Bearer (\S+)$/.exec(header)?.[1] : undefined;
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

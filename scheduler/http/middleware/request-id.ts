/**
 * The scheduler's request id: core/http's `requestId` (the caller's `x-request-id` when sane, else a
 * new UUID; echoed on the response; the rest of the request run in its context), with the header set
 * on Node's response rather than through Hono's `Headers` (see ../headers.ts).
 */
import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { withContext } from "../../../core/context.js";
import type { AppEnv } from "../env.js";
import { setResponseHeader } from "../headers.js";

const SANE = /^[\w.:-]{1,128}$/;

export function requestId(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const given = c.req.header("x-request-id");
    const id = given && SANE.test(given) ? given : randomUUID();
    c.set("requestId", id);
    setResponseHeader(c, "x-request-id", id);
    await withContext({ request_id: id }, next);
  };
}

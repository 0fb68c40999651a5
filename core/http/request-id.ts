import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { withContext } from "../context.js";
import { setResponseHeader } from "./headers.js";

/** The context variable every Kiln HTTP app sets first. */
export interface RequestIdEnv {
  Variables: { requestId: string };
}

/**
 * Takes the caller's `x-request-id` (when sane) or makes one; echoes it on the response, and runs
 * the rest of the request in its context (so a fault it leaves behind is logged with its id).
 */
export function requestId<E extends RequestIdEnv>(): MiddlewareHandler<E> {
  return async (c, next) => {
    const given = c.req.header("x-request-id");
    const id = given && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
    c.set("requestId", id);
    setResponseHeader(c, "x-request-id", id);
    await withContext({ request_id: id }, next);
  };
}

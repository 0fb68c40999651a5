import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { setResponseHeader } from "./headers.js";

/** The context variable every Kiln HTTP app sets first. */
export interface RequestIdEnv {
  Variables: { requestId: string };
}

/**
 * Takes the caller's `x-request-id` (when sane) or makes one, and echoes it on the response. The
 * rest of the request does not run in an AsyncLocalStorage context of its id: on Node 20 that puts
 * a hook on every promise the process makes from then on, which cost the gateway about a fifth of
 * its requests per second (docs/performance.md). A fault a request leaves behind is logged with
 * its stack, not its id.
 */
export function requestId<E extends RequestIdEnv>(): MiddlewareHandler<E> {
  return (c, next) => {
    const given = c.req.header("x-request-id");
    const id = given && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
    c.set("requestId", id);
    setResponseHeader(c, "x-request-id", id);
    return next();
  };
}

/** Turns every failure into the contract's Error body; unknown failures are a logged 500. */
import { setResponseHeaders } from "./headers.js";
import type { Context } from "hono";
import { ApiError, NotFoundError, type ErrorBody } from "../errors.js";
import type { Logger } from "../log.js";
import type { RequestIdEnv } from "./request-id.js";

export function errorResponse(c: Context, err: ApiError): Response {
  setResponseHeaders(c, err.headers);
  return c.json(err.toBody(), err.status as 400);
}

export function onError<E extends RequestIdEnv>(logger: Logger) {
  return (err: Error, c: Context<E>): Response => {
    if (err instanceof ApiError) return errorResponse(c, err);
    logger.error({ err, requestId: c.get("requestId"), path: c.req.path }, "unhandled error");
    const body: ErrorBody = { error: { message: "internal error; the request id is in x-request-id", type: "server_error", code: "internal_error", param: null } };
    return c.json(body, 500);
  };
}

export function notFound(c: Context): Response {
  return errorResponse(c, new NotFoundError("route_not_found", `path: no route ${c.req.method} ${c.req.path}`));
}

/**
 * Response headers set on Node's `ServerResponse` where there is one (under `@hono/node-server`),
 * else through Hono (`app.request()` in tests, other runtimes).
 *
 * Hono keeps the headers of `c.header()` in a WHATWG `Headers`: every name and value is checked
 * again as a ByteString, the object is copied into each response made, and the adapter copies it
 * once more into a plain object for `writeHead`. A response whose headers are a plain object (a
 * `c.json()` with no `c.header()` before it) skips all of that. Node merges the headers set on the
 * `ServerResponse` into those `writeHead` is given, so the client gets the same headers either way.
 * bench:gateway measured it (docs/performance.md, "Control plane"). Both Kiln servers' request id and
 * error answers use it (request-id.ts, errors.ts).
 */
import type { ServerResponse } from "node:http";
import type { Context } from "hono";

/**
 * Sets response header `name` to `value` for the answer `c` will give (its name in lower case, as
 * Hono sends it). Once the answer's head is written (a streamed answer under way) it is dropped:
 * the client can no longer get it, and Hono's `c.header` would break the stream (event-stream.ts).
 */
export function setResponseHeader(c: Context, name: string, value: string): void {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  if (outgoing?.headersSent) return;
  if (outgoing && !c.finalized) outgoing.setHeader(name.toLowerCase(), value);
  else c.header(name, value);
}

/** Sets each of `headers` (see `setResponseHeader`). */
export function setResponseHeaders(c: Context, headers: Readonly<Record<string, string>>): void {
  for (const name in headers) setResponseHeader(c, name, headers[name]!);
}

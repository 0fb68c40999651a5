/**
 * Server-sent-event answers whose text a pump writes as it comes.
 *
 * Under `@hono/node-server` the text is written straight to Node's `ServerResponse`: the head rides
 * with the first event's text in one write, and each later event is one write. Going through a
 * WHATWG `ReadableStream` instead, the adapter sends the head alone, then reads the stream through
 * a chain of promises: about 150 µs more between a completion's first token and the client on a
 * 2-core machine (docs/performance.md, "Chat generation"). Elsewhere (`app.request()` in tests,
 * other runtimes) the text goes through a `ReadableStream`, with the same events.
 *
 * Headers set for the answer with `setResponseHeader` (request id, rate limits, CORS) before it
 * begins are sent with the head either way; once it has begun, `setResponseHeader` drops what it is
 * given. Under Node, nothing may set a header with Hono's `c.header` (before or after `next()`),
 * nor throw after the route has answered: Hono would then build a second response, whose head the
 * adapter would try to write into the running stream, and the stream would end with an error. Every
 * middleware of both servers sets its headers with `setResponseHeader` before `next()`.
 */
import type { ServerResponse } from "node:http";
import type { Context } from "hono";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";

const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" } as const;

/**
 * The most a client may fall behind an answer, in bytes written and not yet taken by the socket:
 * once that much, and the answer's largest event, wait, the next event drops it as if it had gone
 * away (`cancel`: a completion stops generating). One large event never drops a client that reads;
 * far above what a slow link falls behind an honest stream. What a client that never reads would make
 * the server hold, on every stream it keeps open, is otherwise bounded only by `max_tokens`.
 */
export const MAX_LAG_BYTES = 16 * 1024 ** 2;

/**
 * How a pump writes: `send(text)` writes one event's text (or several events', in one write) and
 * returns false once the client lags (what was sent waits in memory beyond the socket's
 * high-water mark); `drained()` resolves when that has gone out (or the answer has ended). A pump
 * may ignore both: a client more than MAX_LAG_BYTES behind is dropped. One that may run for hours
 * waits for `drained()` when `send` returns false, and keeps what it has not sent its own way.
 */
export type SsePump = (send: (text: string) => boolean, drained: () => Promise<void>) => Promise<void>;

/**
 * Answers `c` with the server-sent events `pump` sends; the answer ends when `pump`'s promise
 * settles. `cancel` is called, once, when the client goes away before the end (or was gone
 * already), and when `pump` rejects (it should answer its own failures with an error event: a
 * rejection only ends the answer); `send` then writes nothing.
 */
export function sseResponse(c: Context, pump: SsePump, cancel: () => void): Response {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  let ended = false;
  const gone = (): void => {
    if (!ended) {
      ended = true;
      cancel();
    }
  };
  const signal = c.req.raw.signal; // under Node: aborted when the response closes before its end
  if (signal.aborted) gone();
  else signal.addEventListener("abort", gone, { once: true });
  if (outgoing) {
    outgoing.writeHead(200, SSE_HEADERS); // merged with the headers set on `outgoing` before
    const end = (): void => {
      ended = true;
      outgoing.end();
    };
    const drained = (): Promise<void> =>
      ended || !outgoing.writableNeedDrain
        ? Promise.resolve()
        : new Promise((resolve) => {
            const done = (): void => {
              outgoing.off("drain", done).off("close", done);
              resolve();
            };
            outgoing.on("drain", done).on("close", done);
          });
    /** The most one event of this answer has added to what waits for the client. */
    let largest = 0;
    const send = (text: string): boolean => {
      if (ended || !text) return true;
      // a client this far behind is dropped, as one that went away: what it has not read would all wait
      // in memory (beyond the budget, room for the largest event: one large event is not a lagging client)
      if (outgoing.writableLength > MAX_LAG_BYTES + largest) {
        gone();
        outgoing.destroy();
        return false;
      }
      const before = outgoing.writableLength;
      const ok = outgoing.write(text);
      largest = Math.max(largest, outgoing.writableLength - before);
      return ok;
    };
    void pump(send, drained).then(end, () => (gone(), end()));
    return RESPONSE_ALREADY_SENT;
  }
  const encoder = new TextEncoder();
  const readable = new ReadableStream<Uint8Array>({
    start(controller) {
      const end = (): void => {
        ended = true;
        try {
          controller.close();
        } catch {
          /* the client is gone */
        }
      };
      // the reader pulls at its pace: nothing here waits for it
      void pump(
        (text) => {
          if (!ended && text) controller.enqueue(encoder.encode(text));
          return true;
        },
        () => Promise.resolve(),
      ).then(end, () => (gone(), end()));
    },
    cancel: gone,
  });
  return c.body(readable, 200, SSE_HEADERS);
}

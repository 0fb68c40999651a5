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
 * Headers set for the answer with `setResponseHeader` (request id, rate limits, CORS) are sent with
 * the head either way. Nothing may set headers on Hono's `c.res` before a streamed answer under
 * Node: the head is already written when Hono would merge them.
 */
import type { ServerResponse } from "node:http";
import type { Context } from "hono";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";

const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" } as const;

/**
 * Answers `c` with the server-sent events `pump` sends: `send(text)` writes one event's text (or
 * several events', in one write); the answer ends when `pump`'s promise settles (it must do its
 * own error handling: a rejection only ends the answer). `cancel` is called, once, when the client
 * goes away before the end; `send` then writes nothing.
 */
export function sseResponse(c: Context, pump: (send: (text: string) => void) => Promise<void>, cancel: () => void): Response {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  let ended = false;
  const gone = (): void => {
    if (!ended) {
      ended = true;
      cancel();
    }
  };
  c.req.raw.signal.addEventListener("abort", gone, { once: true }); // under Node: the response closed before its end
  if (outgoing) {
    outgoing.writeHead(200, SSE_HEADERS); // merged with the headers set on `outgoing` before
    const end = (): void => {
      ended = true;
      outgoing.end();
    };
    void pump((text) => {
      if (!ended && text) outgoing.write(text);
    }).then(end, end);
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
      void pump((text) => {
        if (!ended && text) controller.enqueue(encoder.encode(text));
      }).then(end, end);
    },
    cancel: gone,
  });
  return c.body(readable, 200, SSE_HEADERS);
}

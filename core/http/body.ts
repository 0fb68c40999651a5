/**
 * Request bodies read with a size limit that holds while the body streams in: a declared
 * `Content-Length` over the limit is refused before anything is read, and a chunked body is
 * refused at the first byte past it (413, `request_too_large`). Nothing past the limit is kept.
 *
 * Under `@hono/node-server` the body is read straight from Node's `IncomingMessage`. Going through
 * `c.req.raw.body` instead makes the adapter build a whole WHATWG `Request` around a web stream of
 * the socket, which cost 0.5–0.9 ms of every chat completion's time to first token on a 2-vCPU
 * machine (docs/performance.md). Elsewhere (`app.request()` in tests, other runtimes) the web
 * stream is read, with the same limit.
 */
import type { IncomingMessage } from "node:http";
import type { Context } from "hono";
import { InvalidRequestError, PayloadTooLargeError } from "../errors.js";
import { MAX_JSON_DEPTH, nestedDeeperThan } from "../validate.js";

const tooLarge = (maxBytes: number) => new PayloadTooLargeError("request_too_large", `body: larger than the ${maxBytes}-byte limit`);

/** The request body parsed as JSON (see `parseJsonBody`), at most `maxBytes` bytes. */
export async function readJsonBody(c: Context, maxBytes: number): Promise<unknown> {
  return parseJsonBody(await readBodyText(c, maxBytes));
}

/** Parses body text; empty, malformed or too deeply nested JSON is a 400 `invalid_json` naming `body`. */
function parseJsonBody(text: string): unknown {
  if (!text.trim()) throw new InvalidRequestError("invalid_json", "body: empty; expected a JSON object");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new InvalidRequestError("invalid_json", `body: malformed JSON (${(err as Error).message})`);
  }
  if (nestedDeeperThan(value, MAX_JSON_DEPTH)) throw new InvalidRequestError("invalid_json", `body: nested deeper than ${MAX_JSON_DEPTH} levels`);
  return value;
}

/** The request body as UTF-8 text, at most `maxBytes` bytes; throws `PayloadTooLargeError` past that. */
async function readBodyText(c: Context, maxBytes: number): Promise<string> {
  const declared = c.req.header("content-length");
  const length = declared === undefined ? undefined : Number(declared);
  if (length !== undefined && length > maxBytes) throw tooLarge(maxBytes);
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const bytes = incoming ? await readIncoming(incoming, maxBytes, length) : await readWebStream(c.req.raw.body, maxBytes);
  return bytes.toString("utf8");
}

/** Reads `incoming` to its end; `length` is its declared Content-Length (already checked against the limit). */
function readIncoming(incoming: IncomingMessage, maxBytes: number, length: number | undefined): Promise<Buffer> {
  if (incoming.readableEnded) return Promise.resolve(Buffer.alloc(0));
  if (length !== undefined && incoming.readableFlowing !== true && incoming.readableLength >= length) {
    // The usual case: the body came with the headers and Node has parsed all of it. Take it from the
    // stream's buffer now; its `end` event comes a turn of the event loop later.
    return Promise.resolve(length === 0 ? Buffer.alloc(0) : (incoming.read(length) as Buffer));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (fn: () => void) => {
      incoming.off("data", onData).off("end", onEnd).off("error", onError).off("close", onClose);
      fn();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        // Stop reading; the adapter drains or drops the rest once the 413 has been answered.
        incoming.pause();
        settle(() => reject(tooLarge(maxBytes)));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle(() => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    const onError = (err: Error) => settle(() => reject(err));
    // The client is gone; this only keeps the handler from waiting forever (and from logging a server error).
    const onClose = () => {
      if (!incoming.complete) settle(() => reject(new InvalidRequestError("incomplete_body", "body: the connection closed before the body was complete")));
    };
    incoming.on("data", onData).on("end", onEnd).on("error", onError).on("close", onClose);
  });
}

async function readWebStream(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<Buffer> {
  if (!body) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}

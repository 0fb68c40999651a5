/**
 * `POST /v1/chat/completions`: one JSON body, or OpenAI server-sent events with `stream: true`.
 * The first event is awaited before answering, so failures before any text (no capacity, prompt
 * too long) get their own status; later failures become an SSE error event.
 */
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { KilnError, PayloadTooLargeError } from "../../../core/errors.js";
import type { SchedulerMetrics } from "../../metrics.js";
import type { Logger } from "../../../core/log.js";
import { chunkBody, completionBody, completionId, parseJsonBody, usage, usageChunkBody, validateChatCompletion, type ChatCompletionBody } from "../../chat/index.js";
import type { CompletionEvent, Fleet } from "../../fleet/index.js";
import type { AppEnv } from "../env.js";
import { errorResponse } from "../../../core/http/index.js";

export function chatRoutes(fleet: Fleet, maxBodyBytes: number, logger: Logger, metrics: SchedulerMetrics): Hono<AppEnv> {
  return new Hono<AppEnv>().post(
    "/",
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: (c) => errorResponse(c as Context<AppEnv>, new PayloadTooLargeError("request_too_large", `body: larger than the ${maxBodyBytes}-byte limit`)),
    }),
    async (c) => {
      const body = validateChatCompletion(parseJsonBody(await c.req.text()));
      const events = metrics.measure(fleet.submit(body, c.req.raw.signal, c.get("requestId")), body.model);
      const first = await events.next(); // throws the KilnError of a request that never started
      const id = completionId();
      const created = Math.floor(Date.now() / 1000);
      return body.stream
        ? streamCompletion(c, events, first, { id, created, body, logger })
        : c.json(await collect(events, first, id, created, body.model));
    },
  );
}

async function collect(events: AsyncIterator<CompletionEvent>, first: IteratorResult<CompletionEvent>, id: string, created: number, model: string) {
  let text = "";
  for (let r = first; !r.done; r = await events.next()) {
    const e = r.value;
    if (e.type === "text") text += e.text;
    else return completionBody(id, created, model, text, e.finishReason, usage(e.promptTokens, e.completionTokens));
  }
  throw new Error("completion ended without a done event");
}

function streamCompletion(
  c: Context<AppEnv>,
  events: AsyncIterator<CompletionEvent>,
  first: IteratorResult<CompletionEvent>,
  { id, created, body, logger }: { id: string; created: number; body: ChatCompletionBody; logger: Logger },
): Response {
  const encoder = new TextEncoder();
  const sse = (data: unknown): Uint8Array => encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
  let finished = false;
  const stop = (): void => { if (!finished) { finished = true; void events.return?.(); } };
  const readable = new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        controller.enqueue(sse(chunkBody(id, created, body.model, { role: "assistant", content: "" }, null)));
        for (let r = first; !r.done && !finished; r = await events.next()) {
          const e = r.value;
          if (e.type === "text") {
            controller.enqueue(sse(chunkBody(id, created, body.model, { content: e.text }, null)));
          } else {
            controller.enqueue(sse(chunkBody(id, created, body.model, {}, e.finishReason)));
            if (body.includeUsage) controller.enqueue(sse(usageChunkBody(id, created, body.model, usage(e.promptTokens, e.completionTokens))));
            controller.enqueue(sse("[DONE]"));
          }
        }
      } catch (err) {
        const kiln = err instanceof KilnError ? err.toBody() : { error: { message: "internal error", type: "server_error", code: "internal_error" } };
        if (!(err instanceof KilnError)) logger.error({ err }, "stream failed");
        if (!finished) controller.enqueue(sse(kiln));
      }
      finished = true;
      try { controller.close(); } catch { /* the client is gone */ }
    },
    cancel: stop,
  });
  c.req.raw.signal.addEventListener("abort", stop, { once: true });
  return c.body(readable, 200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" });
}

/**
 * `POST /v1/chat/completions`: one JSON body, or OpenAI server-sent events with `stream: true`.
 * The first event is awaited before answering, so failures before any text (no capacity, prompt
 * too long) get their own status; later failures become an SSE error event.
 *
 * Each completion holds one of its account's places in flight (`--max-inflight`, by tier) from
 * its arrival, while it waits in the fleet's queue and while it generates, until its answer is
 * complete (the JSON body made, or the stream's last event written), it fails, or its client goes
 * away. Beyond the cap it is a 429 `too_many_requests_in_flight`. While every slot is busy it waits in
 * its account's queue (the fleet serves the accounts' queues in turn).
 */
import { Hono, type Context } from "hono";
import { KilnError, UpstreamError } from "../../../core/errors.js";
import type { SchedulerMetrics } from "../../metrics.js";
import type { Logger } from "../../../core/log.js";
import { chunkBody, completionBody, completionId, usageChunkBody, validateChatCompletion, type ChatCompletionBody, type ChatValidationOptions, type StreamIdentity } from "../../chat/index.js";
import type { CompletionEvent, Fleet, TokenLogprob } from "../../fleet/index.js";
import type { AppEnv } from "../env.js";
import { readJsonBody } from "../../../core/http/index.js";
import type { Tier } from "../../auth/index.js";
import type { InflightLimiter } from "../../ratelimit/index.js";

/** The per-account cap on chat completions in flight. */
export interface InflightCap {
  inflight: InflightLimiter;
  /** The cap by the account's tier. */
  maxInflight: Readonly<Record<Tier, number>>;
}

/** The response header listing a request's members this service does not use (a newer client's fields). */
export const IGNORED_FIELDS_HEADER = "x-kiln-ignored-fields";

/** Names listed in the header at most; a name must be a plain identifier of at most 64 characters to be listed. */
const MAX_IGNORED_LISTED = 32;
const LISTABLE = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * The `x-kiln-ignored-fields` value for `names` (the client's own member names): plain names listed,
 * anything else (control characters, non-ASCII, very long names: not for a header) and names beyond
 * the first MAX_IGNORED_LISTED counted as "+N more".
 */
export function ignoredFieldsHeader(names: readonly string[]): string {
  const listed = names.filter((n) => LISTABLE.test(n)).slice(0, MAX_IGNORED_LISTED);
  const more = names.length - listed.length;
  return [...listed, ...(more > 0 ? [`+${more} more`] : [])].join(", ");
}

export function chatRoutes(fleet: Fleet, maxBodyBytes: number, logger: Logger, metrics: SchedulerMetrics, cap: InflightCap, validation: ChatValidationOptions = {}): Hono<AppEnv> {
  return new Hono<AppEnv>().post(
    "/",
    async (c) => {
      const { account, tier } = c.get("identity");
      const release = cap.inflight.acquire(account, cap.maxInflight[tier]); // throws the 429 beyond the cap
      const signal = c.req.raw.signal;
      if (signal.aborted) release();
      else signal.addEventListener("abort", release, { once: true }); // the client is gone: its place is free
      let streaming = false;
      try {
        const body = validateChatCompletion(await readJsonBody(c, maxBodyBytes), validation);
        if (body.ignored.length > 0) c.header(IGNORED_FIELDS_HEADER, ignoredFieldsHeader(body.ignored));
        if (signal.aborted) throw new UpstreamError("client_gone", "the client went away before the request was submitted"); // its place is already given back
        const events = metrics.measure(fleet.submit({ ...body, account }, signal, c.get("requestId")), body.model);
        const first = await events.next(); // throws the KilnError of a request that never started
        const id = completionId();
        const created = Math.floor(Date.now() / 1000);
        if (!body.stream) return c.json(await collect(events, first, id, created, body.model, body.logprobs !== undefined));
        streaming = true; // the stream gives the place back when it ends, fails or is cancelled
        return streamCompletion(c, events, first, { id, created, body, logger, release });
      } finally {
        if (!streaming) release();
      }
    },
  );
}

async function collect(events: AsyncIterator<CompletionEvent>, first: IteratorResult<CompletionEvent>, id: string, created: number, model: string, wantsLogprobs: boolean) {
  let text = "";
  const logprobs: TokenLogprob[] | undefined = wantsLogprobs ? [] : undefined;
  for (let r = first; !r.done; r = await events.next()) {
    const e = r.value;
    if (e.type === "text") {
      text += e.text;
      if (logprobs && e.logprobs) for (const l of e.logprobs) logprobs.push(l);
    } else return completionBody(id, created, model, text, e, logprobs);
  }
  throw new Error("completion ended without a done event");
}

function streamCompletion(
  c: Context<AppEnv>,
  events: AsyncIterator<CompletionEvent>,
  first: IteratorResult<CompletionEvent>,
  { id, created, body, logger, release }: { id: string; created: number; body: ChatCompletionBody; logger: Logger; release: () => void },
): Response {
  const encoder = new TextEncoder();
  const sse = (data: unknown): string => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
  /** One event's SSE text; each event is one write (the role chunk rides with the first), so a client gets it in one read. */
  const stream: StreamIdentity = { id, created, model: body.model, includeUsage: body.includeUsage };
  const eventText = (e: CompletionEvent): string => e.type === "text"
    ? sse(chunkBody(stream, { content: e.text }, undefined, body.logprobs !== undefined ? e.logprobs ?? [] : undefined))
    : sse(chunkBody(stream, {}, e)) + (body.includeUsage ? sse(usageChunkBody(stream, e)) : "") + sse("[DONE]");
  let finished = false;
  const stop = (): void => {
    release();
    if (!finished) { finished = true; void events.return?.(); }
  };
  const readable = new ReadableStream<Uint8Array>({
    async start(controller) {
      let text = sse(chunkBody(stream, { role: "assistant", content: "" }));
      try {
        for (let r = first; !r.done && !finished; r = await events.next()) {
          controller.enqueue(encoder.encode(text + eventText(r.value)));
          text = "";
        }
      } catch (err) {
        const kiln = err instanceof KilnError ? err.toBody() : { error: { message: "internal error", type: "server_error", code: "internal_error" } };
        if (!(err instanceof KilnError)) logger.error({ err }, "stream failed");
        if (!finished) controller.enqueue(encoder.encode(text + sse(kiln)));
      }
      finished = true;
      try { controller.close(); } catch { /* the client is gone */ }
      release();
    },
    cancel: stop,
  });
  c.req.raw.signal.addEventListener("abort", stop, { once: true });
  return c.body(readable, 200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
}

/**
 * The generation routes, `POST /v1/chat/completions` and `POST /v1/completions`: one JSON body, or
 * OpenAI server-sent events with `stream: true`. Each API (chat.ts, the legacy prompt API) gives its
 * validation and its bodies; the way through the fleet is the same. The first event is awaited before
 * answering, so failures before any text (no capacity, prompt too long) get their own status; later
 * failures become an SSE error event.
 *
 * Each completion holds one of its account's places in flight per choice (`--max-inflight`, by tier) from
 * its arrival, while it waits in the fleet's queue and while it generates, until its answer is
 * complete (the JSON body made, or the stream's last event written), it fails, or its client goes
 * away. Beyond the cap it is a 429 `too_many_requests_in_flight`. While every slot is busy it waits in
 * its account's queue (the fleet serves the accounts' queues in turn).
 */
import type { UsageKind, UsageLedger } from "../../usage/index.js";
import type { TokenQuota } from "../../ratelimit/index.js";
import { Hono, type Context } from "hono";
import { ApiError, UpstreamError, type ErrorBody } from "../../../core/errors.js";
import type { SchedulerMetrics } from "../../metrics.js";
import type { Logger } from "../../../core/log.js";
import { toolCallId, type Done, type StreamedToolCall } from "../../chat/index.js";
import type { ModelNames } from "../../chat/schema.js";
import type { ToolCall, ToolCallDelta } from "../../../core/chat.js";
import type { CompletionEvent, CompletionRequest, Fleet, TokenLogprob } from "../../fleet/index.js";
import type { AppEnv } from "../env.js";
import { readJsonBody } from "../../../core/http/index.js";
import type { Tier } from "../../auth/index.js";
import type { InflightCounter } from "../../ratelimit/index.js";
import { setResponseHeader } from "../../../core/http/headers.js";
import { sseResponse } from "../../../core/http/event-stream.js";
import { withoutStackTraces } from "../../../core/stackless.js";

/** The per-account cap on completions in flight. */
export interface InflightCap {
  inflight: InflightCounter;
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

/** What every validated generation request has besides the fleet's request. */
export interface GenerationBody extends CompletionRequest {
  /** The name the client sent (an id or an alias): the answer's `model`, as OpenAI-compatible proxies (LiteLLM) echo it; `model` is the canonical id routed, metered and billed. */
  requestedModel: string;
  stream: boolean;
  /** `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Top-level members this service does not use, for the header. */
  ignored: string[];
}

/** One answer's identity: its id, creation time and model. */
export interface Answer {
  id: string;
  created: number;
  model: string;
}

/** Each choice's text, by index, the log probabilities of its tokens when asked for, and the functions it called. */
export interface Choice {
  text: string;
  logprobs: TokenLogprob[] | undefined;
  toolCalls: ToolCall[];
}

/** What an API gives the generation route: its validation and the shapes of its answers. */
export interface GenerationApi<B extends GenerationBody> {
  /** What its usage rows are (`chat`, `completion`). */
  usageKind: UsageKind;
  validate(body: unknown): B;
  newId(): string;
  /** The whole answer: every choice generated. */
  answer(body: B, a: Answer, choices: Choice[], done: Done): unknown;
  /** The chunks that open a stream, before any text (the API's, per choice). */
  opening(body: B, a: Answer): unknown[];
  /** A chunk of choice `index`'s text; `offset` is where it starts among that choice's text. */
  textChunk(body: B, a: Answer, index: number, text: string, logprobs: TokenLogprob[] | undefined, offset: number): unknown;
  /** A chunk of choice `index`'s function-call pieces (an API without tools never gets them). */
  toolCallChunk?(body: B, a: Answer, index: number, pieces: StreamedToolCall[]): unknown;
  /** The chunks that end a stream (before `[DONE]`). */
  closing(body: B, a: Answer, done: Done): unknown[];
}

export interface GenerationDeps {
  fleet: Fleet;
  /** The names a request's `model` may give (the scheduler's catalog). Default the built-in ids. */
  models?: ModelNames;
  usage: UsageLedger;
  tokens: TokenQuota;
  maxBodyBytes: number;
  logger: Logger;
  metrics: SchedulerMetrics;
  cap: InflightCap;
}

export function generationRoute<B extends GenerationBody>(api: GenerationApi<B>, deps: GenerationDeps): Hono<AppEnv> {
  const { fleet, usage, logger, metrics } = deps;
  return new Hono<AppEnv>().post("/", (c) =>
    withPlaces(
      c,
      deps,
      api.validate,
      (body) => body,
      async (body, signal, keep) => {
        const { account, keyId } = c.get("identity");
        const owner = { account, keyId, model: body.model, kind: api.usageKind, requestId: c.get("requestId") };
        const onUsage = (used: { promptTokens: number; completionTokens: number }) => usage.record({ ...owner, ...used, audioSeconds: 0 });
        const events = metrics.measure(fleet.submit({ ...body, account, onUsage }, signal, c.get("requestId")), body.model);
        const first = await events.next(); // throws the ApiError of a request that never started
        const answer: Answer = { id: api.newId(), created: Math.floor(Date.now() / 1000), model: body.requestedModel };
        if (!body.stream) return c.json((await collect(api, body, answer, events, first)) as object);
        return streamAnswer(c, api, body, answer, events, first, logger, keep()); // the stream gives the places back when it ends, fails or is cancelled
      },
    ),
  );
}

/**
 * Runs `handle` for a generation request with its account's places taken: one in flight per choice
 * (`--max-inflight`; the 429 beyond it) from its arrival, and its token quotas' reservation for what
 * it may use (`request(body)` is what the fleet runs), once its body is validated. They are given back
 * when `handle` ends, or when the client goes, unless `handle` hands them to a stream (`keep()`
 * returns their release).
 */
export async function withPlaces<B extends { ignored: readonly string[]; n?: number }>(
  c: Context<AppEnv>,
  deps: Pick<GenerationDeps, "cap" | "tokens" | "maxBodyBytes">,
  validate: (json: unknown) => B,
  request: (body: B) => Parameters<typeof tokenEstimate>[0],
  handle: (body: B, signal: AbortSignal, keep: () => () => void) => Promise<Response>,
): Promise<Response> {
  const { cap, tokens } = deps;
  const { account, tier } = c.get("identity");
  const place = cap.inflight.acquire(account, cap.maxInflight[tier]);
  const places = [typeof place === "function" ? place : await place]; // the in-memory counter answers at once
  const release = (): void => {
    for (const free of places.splice(0)) free();
  };
  let kept = false;
  try {
    // a client gone while its body is read fails the read (and its place is given back below)
    const json = await readJsonBody(c, deps.maxBodyBytes);
    const body = withoutStackTraces(() => validate(json));
    const signal = c.req.raw.signal; // made only for a request that will run: a refusal never needs it
    if (signal.aborted) release();
    else signal.addEventListener("abort", release, { once: true }); // the client is gone: its places are free
    for (let i = 1; i < (body.n ?? 1); i++) places.push(await cap.inflight.acquire(account, cap.maxInflight[tier]));
    places.push(await tokens.reserve(account, tier, tokenEstimate(request(body))));
    if (body.ignored.length > 0) setResponseHeader(c, IGNORED_FIELDS_HEADER, ignoredFieldsHeader(body.ignored));
    if (signal.aborted) throw new UpstreamError("client_gone", "the client went away before the request was submitted"); // its places are already given back
    return await handle(body, signal, () => {
      kept = true;
      return release;
    });
  } finally {
    if (!kept) release();
  }
}

export function tokenEstimate(body: Pick<GenerationBody, "messages" | "prompt" | "maxTokens" | "n" | "tools">): number {
  let chars = (body.prompt?.length ?? 0) + (body.tools?.length ? JSON.stringify(body.tools).length : 0);
  for (const m of body.messages) {
    chars += contentChars(m.content) + (m.toolCallId?.length ?? 0);
    for (const call of m.toolCalls ?? []) chars += call.id.length + call.name.length + call.arguments.length;
  }
  return Math.ceil(chars / 4) + (body.maxTokens ?? 0) * (body.n ?? 1);
}

/** The characters of a message's content: a string, or content parts (`{type: "text", text}`) as a client sent them. */
function contentChars(content: unknown): number {
  if (typeof content === "string") return content.length;
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const part of content as unknown[]) {
    const text = (part as { text?: unknown } | null)?.text;
    n += typeof text === "string" ? text.length : JSON.stringify(part ?? null).length;
  }
  return n;
}

/**
 * The pieces of function calls of one event, the first of each call given its id (and kept in `calls`,
 * the choice's calls so far, by their place). Calls open in order: a piece of a call never opened, or
 * opening one past the next place (an agent's index is not trusted to size an array), is dropped.
 */
function namedToolCalls(deltas: ToolCallDelta[] | undefined, calls: ToolCall[]): StreamedToolCall[] {
  const pieces: StreamedToolCall[] = [];
  for (const d of deltas ?? []) {
    if (d.name !== undefined && d.index === calls.length) {
      const call = (calls[d.index] = { id: toolCallId(), name: d.name, arguments: "" });
      pieces.push({ index: d.index, id: call.id, name: call.name, arguments: d.arguments });
    } else if (calls[d.index]) pieces.push({ index: d.index, arguments: d.arguments });
  }
  return pieces;
}

async function collect<B extends GenerationBody>(api: GenerationApi<B>, body: B, answer: Answer, events: AsyncIterator<CompletionEvent>, first: IteratorResult<CompletionEvent>) {
  const choices: Choice[] = Array.from({ length: body.n ?? 1 }, () => ({ text: "", logprobs: body.logprobs !== undefined ? [] : undefined, toolCalls: [] }));
  for (let r = first; !r.done; r = await events.next()) {
    const e = r.value;
    if (e.type === "text") {
      const choice = choices[e.index];
      if (!choice) continue; // an index the request never asked for
      choice.text += e.text;
      if (choice.logprobs && e.logprobs) for (const l of e.logprobs) choice.logprobs.push(l);
      for (const piece of namedToolCalls(e.toolCalls, choice.toolCalls)) choice.toolCalls[piece.index]!.arguments += piece.arguments;
    } else if (e.type === "done") return api.answer(body, answer, choices, e);
  }
  throw new UpstreamError("agent_error", "the agent ended the completion without finishing it");
}

function streamAnswer<B extends GenerationBody>(
  c: Context<AppEnv>,
  api: GenerationApi<B>,
  body: B,
  answer: Answer,
  events: AsyncIterator<CompletionEvent>,
  first: IteratorResult<CompletionEvent>,
  logger: Logger,
  release: () => void,
): Response {
  const sse = (data: unknown): string => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
  const offsets = new Array<number>(body.n ?? 1).fill(0);
  const calls = Array.from({ length: body.n ?? 1 }, (): ToolCall[] => []);
  /** One event's SSE text; each event is one write (the opening chunks ride with the first), so a client gets it in one read. */
  const eventText = (e: CompletionEvent): string => {
    if (e.type === "done") return api.closing(body, answer, e).map(sse).join("") + sse("[DONE]");
    if (e.type !== "text" || offsets[e.index] === undefined) return ""; // a completion has no other events, nor choices it did not ask for
    let chunk = e.text ? sse(api.textChunk(body, answer, e.index, e.text, body.logprobs !== undefined ? (e.logprobs ?? []) : undefined, offsets[e.index]!)) : "";
    offsets[e.index]! += e.text.length;
    const pieces = namedToolCalls(e.toolCalls, calls[e.index]!);
    if (pieces.length > 0 && api.toolCallChunk) chunk += sse(api.toolCallChunk(body, answer, e.index, pieces));
    return chunk;
  };
  return eventStream(c, {
    events,
    first,
    opening: api.opening(body, answer).map(sse).join(""),
    eventText,
    failure: (err) =>
      sse(err instanceof ApiError ? err.toBody() : ({ error: { message: "internal error", type: "server_error", code: "internal_error", param: null } } satisfies ErrorBody)),
    logger,
    release,
  });
}

/**
 * A running completion as server-sent events: `opening` rides with the first event's text, then each
 * event is one write (a client gets it in one read); a failure after the stream began is
 * `failure(err)`'s text, the last. A client that goes away stops the events and releases the slot.
 */
export function eventStream(
  c: Context<AppEnv>,
  o: {
    events: AsyncIterator<CompletionEvent>;
    first: IteratorResult<CompletionEvent>;
    opening: string;
    eventText: (e: CompletionEvent) => string;
    failure: (err: unknown) => string;
    logger: Logger;
    release: () => void;
  },
): Response {
  let finished = false;
  const stop = (): void => {
    o.release();
    if (!finished) {
      finished = true;
      void o.events.return?.();
    }
  };
  return sseResponse(
    c,
    async (send) => {
      let text = o.opening;
      try {
        let answered = false;
        for (let r = o.first; !r.done && !finished; r = await o.events.next()) {
          answered ||= r.value.type === "done";
          send(text + o.eventText(r.value));
          text = "";
        }
        // events that end without a `done` (the fleet refuses another last message): the stream says it failed, not that it ended
        if (!answered && !finished) throw new UpstreamError("agent_error", "the agent ended the completion without finishing it");
      } catch (err) {
        if (!(err instanceof ApiError)) o.logger.error({ err }, "stream failed");
        if (!finished) send(text + o.failure(err));
      }
      finished = true;
      o.release();
    },
    stop,
  );
}

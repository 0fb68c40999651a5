/**
 * `POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API on the fleet's one
 * request (docs/anthropic-api.md). A request is translated (scheduler/chat/anthropic.ts) into the
 * `CompletionRequest` chat completions build and goes the same way: the account's places in flight
 * and token quotas, the fleet's queues and routing, the usage ledger and the metrics. What differs is
 * the answer's shape, and that every refusal is in Anthropic's shape (`{"type": "error", "error":
 * {type, message}, "request_id"}`) with its statuses; so these routes are mounted with their own key
 * check (`x-api-key`, or `Authorization: Bearer`) and rate limit, before the rest of `/v1`'s.
 *
 * As in the generation route (generate.ts), the first event is awaited before answering, so a failure
 * before any text gets its own status; a later one is the stream's `error` event. A stop sequence is
 * matched here (the node is not told them): at a match the generation is cancelled on its node, and the
 * answer waits for the node's count of what it generated before ending (`output_tokens`).
 */
import { Hono, type Context, type MiddlewareHandler } from "hono";
import type { RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { ApiError, AuthenticationError, InvalidRequestError, NotFoundError, UpstreamError } from "../../../core/errors.js";
import { parseBearer } from "../../../core/http/index.js";
import type { KeyService } from "../../auth/index.js";
import type { RequestLimiter } from "../../ratelimit/index.js";
import type { CompletionEvent, CompletionRequest } from "../../fleet/index.js";
import {
  anthropicError,
  AnthropicAnswer,
  endOf,
  errorEvent,
  internalErrorBody,
  sseText,
  validateCountTokens,
  validateMessages,
  type AnthropicErrorBody,
  type AnthropicRequest,
  type End,
} from "../../chat/anthropic.js";
import { CountTokensRequest, MessagesRequest } from "../../chat/anthropic-schema.js";
import type { AppEnv } from "../env.js";
import { rateLimit, tokenQuota } from "../middleware/auth.js";
import { withPlaces, type GenerationDeps } from "./generate.js";
import { setResponseHeader, setResponseHeaders } from "../../../core/http/headers.js";
import { sseResponse } from "../../../core/http/event-stream.js";

export interface MessagesDeps extends GenerationDeps {
  keys: KeyService;
  limiter: RequestLimiter;
  standardRpm: number;
}

/** How long an answer ended at a stop sequence waits for the node's count of what it generated (its answer to the cancel). */
export const STOP_USAGE_WAIT_MS = 10_000;

/** `anthropic-version`: a date, as Anthropic's versions are (the SDKs send 2023-06-01); Kiln answers one shape for all. */
const VERSION = /^\d{4}-\d{2}-\d{2}$/;

export function messagesRoutes(deps: MessagesDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.onError((err, c) => {
    const requestId = c.get("requestId") ?? null;
    if (err instanceof ApiError) {
      const answer = anthropicError(err, requestId);
      setResponseHeaders(c, answer.headers);
      return c.json(answer.body, answer.status as 400);
    }
    deps.logger.error({ err, requestId, path: c.req.path }, "unhandled error");
    return c.json(internalErrorBody(requestId), 500);
  });
  app.use("*", anthropicHeaders(), anthropicAuth(deps.keys), rateLimit(deps.limiter, deps.standardRpm));
  app.post("/", tokenQuota(deps.tokens), (c) => create(c, deps));
  app.post("/count_tokens", tokenQuota(deps.tokens), (c) => countTokens(c, deps));
  app.all("*", (c) => {
    throw new NotFoundError("route_not_found", `path: no route ${c.req.method} ${c.req.path}`);
  });
  return app;
}

/** Anthropic's `request-id` header (its SDKs read it), and `anthropic-version` checked when sent. */
function anthropicHeaders(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    setResponseHeader(c, "request-id", c.get("requestId"));
    const version = c.req.header("anthropic-version");
    if (version !== undefined && !VERSION.test(version))
      throw new InvalidRequestError(
        "invalid_value",
        `anthropic-version: expected a version date such as 2023-06-01, got ${JSON.stringify(version.slice(0, 40))}`,
        "anthropic-version",
      );
    await next();
  };
}

/**
 * The API key from `x-api-key` (Anthropic's header, which its SDKs and Claude Code send) or from
 * `Authorization: Bearer` (their auth-token setting). Both may be sent only with the same key.
 */
export function anthropicAuth(keys: KeyService): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const apiKey = c.req.header("x-api-key");
    const authorization = c.req.header("authorization");
    if (apiKey === undefined) {
      if (authorization === undefined) throw new AuthenticationError("missing_api_key", "x-api-key: missing; send `x-api-key: <API_KEY>` (or `Authorization: Bearer <API_KEY>`)");
      c.set("identity", await keys.authenticate(authorization));
    } else {
      if (!/^\S+$/.test(apiKey)) throw new AuthenticationError("invalid_api_key", "x-api-key: not an API key (empty, or with spaces)");
      if (authorization !== undefined && parseBearer(authorization) !== apiKey)
        throw new AuthenticationError("invalid_api_key", "x-api-key: Authorization carries another key; send one of them");
      try {
        c.set("identity", await keys.authenticate(`Bearer ${apiKey}`));
      } catch (err) {
        if (err instanceof AuthenticationError) throw new AuthenticationError(err.code, err.message.replace(/^Authorization:/, "x-api-key:"));
        throw err;
      }
    }
    await next();
  };
}

/** A request on its way through the fleet: its events, the first already read, and how to end it early at a stop sequence. */
interface Run {
  events: AsyncGenerator<CompletionEvent>;
  first: IteratorResult<CompletionEvent>;
  /** Cancels the generation on its node; resolves with the end once the node has said what it generated. */
  stopAt(stopSequence: string): Promise<End>;
}

/** Submits the request to the fleet, its usage written to the ledger, and awaits its first event (which throws the error of a request that never started). */
async function submit(c: Context<AppEnv>, deps: MessagesDeps, request: CompletionRequest): Promise<Run> {
  const { account, keyId } = c.get("identity");
  const requestId = c.get("requestId");
  const cancel = new AbortController();
  const signal = c.req.raw.signal;
  if (signal.aborted) cancel.abort();
  else signal.addEventListener("abort", () => cancel.abort(), { once: true });
  let told!: (used: { promptTokens: number; completionTokens: number }) => void;
  const used = new Promise<{ promptTokens: number; completionTokens: number }>((resolve) => (told = resolve));
  const owner = { account, keyId, model: request.model, kind: "chat" as const, requestId };
  const onUsage = (u: { promptTokens: number; completionTokens: number }): void => {
    deps.usage.record({ ...owner, ...u, audioSeconds: 0 });
    told(u);
  };
  const events = deps.metrics.measure(deps.fleet.submit({ ...request, account, onUsage }, cancel.signal, requestId), request.model);
  const first = await events.next();
  return {
    events,
    first,
    async stopAt(stopSequence) {
      cancel.abort();
      void events.return(undefined);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, STOP_USAGE_WAIT_MS, undefined)));
      const u = await Promise.race([used, late]).finally(() => clearTimeout(timer));
      if (!u) throw new UpstreamError("agent_error", "the node did not say what it had generated when it was stopped at a stop sequence");
      return { stopReason: "stop_sequence", stopSequence, promptTokens: u.promptTokens, completionTokens: u.completionTokens, cachedTokens: 0 };
    },
  };
}

/** `POST /v1/messages`. */
function create(c: Context<AppEnv>, deps: MessagesDeps): Promise<Response> {
  return withPlaces(
    c,
    deps,
    (body) => validateMessages(body, deps.models ? { models: deps.models } : {}),
    (a) => a.request,
    async (a, _signal, keep) => {
      const run = await submit(c, deps, a.request);
      const answer = new AnthropicAnswer(a.requestedModel, a.stopSequences, a.stream);
      if (!a.stream) return c.json(await collect(run, answer));
      return stream(c, run, answer, keep(), deps);
    },
  );
}

/** The whole answer of a non-streamed request. */
async function collect(run: Run, answer: AnthropicAnswer) {
  for (let r = run.first; !r.done; r = await run.events.next()) {
    if (r.value.type === "done") return answer.message(endOf(r.value));
    answer.push(r.value);
    if (answer.stopped !== undefined) return answer.message(await run.stopAt(answer.stopped));
  }
  throw new UpstreamError("agent_error", "the agent ended the completion without finishing it");
}

/** The answer as Anthropic's server-sent events; a failure after they began is an `error` event, the last. */
function stream(c: Context<AppEnv>, run: Run, answer: AnthropicAnswer, release: () => void, deps: MessagesDeps): Response {
  const requestId = c.get("requestId");
  let finished = false;
  const stop = (): void => {
    release();
    if (!finished) {
      finished = true;
      void run.events.return(undefined);
    }
  };
  return sseResponse(
    c,
    async (send) => {
      let text = sseText(answer.start()); // rides with the first event's, in one write
      try {
        let ended = false;
        for (let r = run.first; !r.done && !finished; r = await run.events.next()) {
          if (r.value.type === "done") {
            send(text + sseText(answer.finish(endOf(r.value))));
            ended = true;
            break;
          }
          send(text + sseText(answer.push(r.value)));
          text = "";
          if (answer.stopped !== undefined) {
            send(sseText(answer.finish(await run.stopAt(answer.stopped))));
            ended = true;
            break;
          }
        }
        if (!ended && !finished) throw new UpstreamError("agent_error", "the agent ended the completion without finishing it");
      } catch (err) {
        let body: AnthropicErrorBody;
        if (err instanceof ApiError) body = anthropicError(err, requestId).body;
        else {
          deps.logger.error({ err, requestId }, "stream failed");
          body = internalErrorBody(requestId);
        }
        send(text + sseText([errorEvent(body)]));
      }
      finished = true;
      release();
    },
    stop,
  );
}

/** `POST /v1/messages/count_tokens`: the prompt's tokens, as a node counts them evaluating it for one greedy token. */
function countTokens(c: Context<AppEnv>, deps: MessagesDeps): Promise<Response> {
  return withPlaces(
    c,
    deps,
    (body) => validateCountTokens(body, deps.models ? { models: deps.models } : {}),
    (a) => a.request,
    async (a) => {
      const run = await submit(c, deps, a.request);
      for (let r = run.first; !r.done; r = await run.events.next()) if (r.value.type === "done") return c.json({ input_tokens: r.value.promptTokens });
      throw new UpstreamError("agent_error", "the agent ended the completion without finishing it");
    },
  );
}

// ---------------------------------------------------------------------------------------------
// The OpenAPI description of these routes (scheduler/http/openapi.ts lists them)

const AnthropicError = z
  .object({
    type: z.literal("error"),
    error: z.object({
      type: z.enum([
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "timeout_error",
        "overloaded_error",
      ]),
      message: z.string().meta({ description: "Starts with the field at fault, when one is: `messages[0].content[1]: …`." }),
    }),
    request_id: z.string().nullable(),
  })
  .meta({ id: "AnthropicError", description: "Anthropic's error body; Kiln's own code is in the x-kiln-error-code header." });

const AnthropicUsage = z.object({
  input_tokens: z.int().meta({ description: "Prompt tokens the slot's KV cache did not hold." }),
  output_tokens: z.int(),
  cache_creation_input_tokens: z.int().nullable(),
  cache_read_input_tokens: z.int().nullable().meta({ description: "Prompt tokens the slot's KV cache already held (reused)." }),
  cache_creation: z.null(),
  inference_geo: z.null(),
  output_tokens_details: z.null(),
  server_tool_use: z.null(),
  service_tier: z.literal("standard"),
  speed: z.null(),
});

const AnthropicContentBlock = z.union([
  z.object({ type: z.literal("text"), text: z.string(), citations: z.null() }),
  z.object({
    type: z.literal("tool_use"),
    id: z.string(),
    name: z.string(),
    input: z.record(z.string(), z.unknown()),
    caller: z.object({ type: z.literal("direct") }),
  }),
]);

const AnthropicMessage = z
  .object({
    id: z.string(),
    type: z.literal("message"),
    role: z.literal("assistant"),
    model: z.string().meta({ description: "The name the request sent." }),
    content: z.array(AnthropicContentBlock),
    stop_reason: z.enum(["end_turn", "max_tokens", "stop_sequence", "tool_use"]).nullable(),
    stop_sequence: z.string().nullable(),
    stop_details: z.null(),
    container: z.null(),
    diagnostics: z.null(),
    usage: AnthropicUsage,
  })
  .meta({ id: "AnthropicMessage" });

const AnthropicStreamEvent = z
  .object({ type: z.enum(["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop", "ping", "error"]) })
  .loose()
  .meta({ id: "AnthropicStreamEvent", description: "An event's data; its SSE event name is its type." });

/** The routes' entries in the OpenAPI document. */
export function messagesOpenApi(): RouteConfig[] {
  const errors = (...statuses: number[]) =>
    Object.fromEntries(statuses.map((s) => [s, { description: "Anthropic's error body.", content: { "application/json": { schema: AnthropicError } } }]));
  const security: Record<string, string[]>[] = [{ apiKey: [] }, { anthropicApiKey: [] }];
  return [
    {
      method: "post",
      path: "/v1/messages",
      summary: "Create a message (Anthropic's Messages API)",
      tags: ["anthropic"],
      security,
      request: { body: { required: true, content: { "application/json": { schema: MessagesRequest } } } },
      responses: {
        200: {
          description: "The message; with stream: true, Anthropic's server-sent events (message_start, content_block_start/delta/stop, message_delta, message_stop, ping; error).",
          content: { "application/json": { schema: AnthropicMessage }, "text/event-stream": { schema: AnthropicStreamEvent } },
        },
        ...errors(400, 401, 404, 413, 429, 500, 529),
      },
    },
    {
      method: "post",
      path: "/v1/messages/count_tokens",
      summary: "Count a message's input tokens (Anthropic's Messages API)",
      description: "Exact: a node renders the conversation through the model's chat template and tokenizes it, evaluating it for one greedy token (counted in the usage ledger).",
      tags: ["anthropic"],
      security,
      request: { body: { required: true, content: { "application/json": { schema: CountTokensRequest } } } },
      responses: {
        200: { description: "The prompt's tokens.", content: { "application/json": { schema: z.object({ input_tokens: z.int() }).meta({ id: "AnthropicTokensCount" }) } } },
        ...errors(400, 401, 404, 413, 429, 500, 529),
      },
    },
  ];
}

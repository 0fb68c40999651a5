/**
 * The scheduler's OpenAPI 3.1 document, generated from the zod schemas the routes validate with
 * (requests) and describe their answers with (responses); served at `GET /v1/openapi.json`.
 * Every route of the HTTP app is listed (test/openapi.test.ts checks it against the app's routes).
 */
import { OpenAPIRegistry, OpenApiGeneratorV31, type RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { ERROR_TYPES } from "../../core/errors.js";
import { EmbeddingsRequest } from "../chat/embeddings.js";
import { LegacyCompletionRequest } from "../chat/legacy.js";
import { ChatCompletionRequest } from "../chat/schema.js";
import { ResponsesRequest } from "../chat/responses-schema.js";
import { CreateKeyRequest, FleetDrainRequest, FleetPinRequest, FleetUnloadRequest } from "../dashboard/schema.js";
import { McpServerConfigBody, McpTestRequest, SecretValueRequest } from "../mcp/index.js";
import { messagesOpenApi } from "./routes/messages.js";
import { MODEL_STATUSES } from "../catalog/index.js";
import { CATALOG_DEFAULTS, CATALOG_LIMITS } from "../../models/operator-catalog.js";
import { MAX_SPECULATION_CHARS } from "../../core/speculation.js";

const ErrorBody = z
  .object({
    error: z.object({
      message: z.string().meta({ description: "Starts with the field at fault, when one is: `temperature: expected …`." }),
      type: z.enum(ERROR_TYPES),
      code: z.string().meta({ description: "A stable machine word, such as model_not_found or unsupported_parameter." }),
      param: z.string().nullable().meta({ description: "On invalid-request errors: the field at fault (its path), or null; null on the others." }),
    }),
  })
  .meta({ id: "Error" });

const Usage = z
  .strictObject({
    prompt_tokens: z.int(),
    completion_tokens: z.int(),
    total_tokens: z.int(),
    prompt_tokens_details: z.strictObject({
      cached_tokens: z.int().meta({ description: "Prompt tokens whose KV cache the serving slot already held (a conversation's earlier turns)." }),
    }),
  })
  .meta({ id: "Usage" });
const TopLogprob = z.strictObject({ token: z.string(), logprob: z.number(), bytes: z.array(z.int()) });
const Logprobs = z
  .strictObject({
    content: z.array(TopLogprob.extend({ top_logprobs: z.array(TopLogprob) })),
    refusal: z.null(),
  })
  .nullable()
  .meta({ id: "Logprobs", description: "With logprobs: true, each generated token's log probability (at least -9999) and its top_logprobs alternatives; null otherwise." });
const fingerprint = z.string().optional().meta({ description: "The serving model file's digest and llama.cpp build (absent from an agent that reports none)." });

/** A chat completion as answered (non-streamed). */
const ToolCallBody = z.strictObject({
  id: z.string().meta({ description: "The call's id; its result is sent back in a tool message with this tool_call_id." }),
  type: z.literal("function"),
  function: z.strictObject({ name: z.string(), arguments: z.string().meta({ description: "JSON text valid for the function's parameters." }) }),
});

const ToolCallDeltaBody = z.strictObject({
  index: z.int().meta({ description: "The call's place in the reply." }),
  id: z.string().optional().meta({ description: "On the call's first delta, with type and name." }),
  type: z.literal("function").optional(),
  function: z.strictObject({ name: z.string().optional(), arguments: z.string().meta({ description: "A fragment: the call's fragments joined are its arguments." }) }),
});

/** The form of `POST /v1/audio/*` (its checks: scheduler/audio/fields.ts). */
const AudioRequest = (task: "transcriptions" | "translations") =>
  z
    .object({
      file: z.string().meta({ description: "The audio or video file (binary), up to --max-audio-upload (1 GB) and 4 hours.", format: "binary" }),
      model: z.string().meta({ description: "whisper-1 (each node's default whisper model) or a whisper model name of GET /v1/models." }),
      ...(task === "transcriptions" ? { language: z.string().optional().meta({ description: "A whisper language code or name; detected when absent." }) } : {}),
      prompt: z.string().optional(),
      response_format: z.enum(["json", "text", "srt", "verbose_json", "vtt"]).optional(),
      temperature: z.number().min(0).max(1).optional(),
      "timestamp_granularities[]": z
        .array(z.enum(["word", "segment"]))
        .optional()
        .meta({ description: "With verbose_json only." }),
      ...(task === "transcriptions" ? { stream: z.boolean().optional().meta({ description: "transcript.text.delta events as segments finish; with json or text." }) } : {}),
      diarize: z.boolean().optional().meta({ description: "Kiln extension: speaker labels." }),
      min_speakers: z.int().min(1).max(20).optional(),
      max_speakers: z.int().min(1).max(20).optional(),
      target_language: z.string().optional().meta({ description: "Kiln extension: translate into any whisper language." }),
    })
    .meta({ id: task === "transcriptions" ? "TranscriptionRequest" : "TranslationRequest" });

const AudioJson = z
  .object({
    text: z.string(),
    usage: z.object({ type: z.literal("duration"), seconds: z.int() }),
    task: z.enum(["transcribe", "translate"]).optional(),
    language: z.string().optional(),
    duration: z.number().optional(),
    segments: z
      .array(
        z.object({
          id: z.int(),
          seek: z.int(),
          start: z.number(),
          end: z.number(),
          text: z.string(),
          avg_logprob: z.number(),
          compression_ratio: z.number(),
          tokens: z.array(z.int()).meta({ description: "Always empty: whisper's token ids are not carried from the node." }),
          temperature: z.number().meta({ description: "The temperature decoding started at (the request's, default 0); the fallback may have gone hotter." }),
          no_speech_prob: z.number().meta({ description: "Always 0: not measured (the node gives whisper only what its voice-activity model found to be speech)." }),
          speaker: z.string().optional(),
        }),
      )
      .optional(),
    words: z.array(z.object({ word: z.string(), start: z.number(), end: z.number(), speaker: z.string().optional() })).optional(),
  })
  .meta({ id: "AudioTranscript", description: "response_format json: text and usage; verbose_json: task, language, duration, segments and, when asked, words as well." });

const UsageReport = z
  .strictObject({
    object: z.literal("list"),
    account: z.string(),
    start_date: z.string(),
    end_date: z.string(),
    data: z.array(
      z.strictObject({
        date: z.string(),
        model: z.string(),
        requests: z.int(),
        prompt_tokens: z.int(),
        completion_tokens: z.int(),
        total_tokens: z.int(),
        audio_seconds: z.number(),
      }),
    ),
  })
  .meta({ id: "UsageReport" });

const usageQuery = z.object({
  start_date: z.string().optional().meta({ description: "YYYY-MM-DD (UTC); default 29 days before end_date." }),
  end_date: z.string().optional().meta({ description: "YYYY-MM-DD (UTC); default today." }),
});

const FINISH_REASONS = ["stop", "length", "tool_calls"] as const;

export const ChatCompletionResponse = z
  .strictObject({
    id: z.string(),
    object: z.literal("chat.completion"),
    created: z.int(),
    model: z.string(),
    system_fingerprint: fingerprint,
    choices: z.array(
      z.strictObject({
        index: z.int(),
        message: z.strictObject({
          role: z.literal("assistant"),
          content: z.string().nullable().meta({ description: "null when the reply is function calls alone." }),
          refusal: z.null(),
          tool_calls: z.array(ToolCallBody).optional(),
        }),
        logprobs: Logprobs,
        finish_reason: z.enum(FINISH_REASONS),
      }),
    ),
    usage: Usage,
  })
  .meta({ id: "ChatCompletion" });

/** One server-sent event of a streamed chat completion. */
export const ChatCompletionChunk = z
  .strictObject({
    id: z.string(),
    object: z.literal("chat.completion.chunk"),
    created: z.int(),
    model: z.string(),
    system_fingerprint: fingerprint.meta({ description: "On the finishing chunk and the usage chunk; absent from the others (the serving pool is known once it is done)." }),
    choices: z.array(
      z.strictObject({
        index: z.int(),
        delta: z.strictObject({ role: z.literal("assistant").optional(), content: z.string().optional(), tool_calls: z.array(ToolCallDeltaBody).optional() }),
        logprobs: Logprobs,
        finish_reason: z.enum(FINISH_REASONS).nullable(),
      }),
    ),
    usage: Usage.nullable().optional().meta({ description: "With stream_options.include_usage: null on every chunk but the last, which has no choices and the usage." }),
  })
  .meta({ id: "ChatCompletionChunk" });

const ResponseUsage = z.strictObject({
  input_tokens: z.int(),
  input_tokens_details: z.strictObject({
    cached_tokens: z.int(),
    cache_write_tokens: z.int().meta({ description: "Always 0: no prompt cache is written apart from the slot's KV cache." }),
  }),
  output_tokens: z.int(),
  output_tokens_details: z.strictObject({ reasoning_tokens: z.int().meta({ description: "Always 0: no reasoning mode runs." }) }),
  total_tokens: z.int(),
});
const ResponseOutputItem = z.union([
  z.strictObject({
    id: z.string(),
    type: z.literal("message"),
    role: z.literal("assistant"),
    status: z.enum(["in_progress", "completed", "incomplete"]),
    content: z.array(z.strictObject({ type: z.literal("output_text"), text: z.string(), annotations: z.array(z.unknown()).max(0), logprobs: z.array(z.unknown()).max(0) })),
  }),
  z.strictObject({
    id: z.string(),
    type: z.literal("function_call"),
    call_id: z.string().meta({ description: "Sent back in a function_call_output item with the call's result." }),
    name: z.string(),
    arguments: z.string().meta({ description: "JSON text valid for the function's parameters." }),
    status: z.enum(["in_progress", "completed", "incomplete"]),
  }),
]);

/** OpenAI's Response object as this service answers it (POST /v1/responses). */
export const ResponseObject = z
  .object({
    id: z.string(),
    object: z.literal("response"),
    created_at: z.int(),
    status: z.enum(["in_progress", "completed", "incomplete", "failed"]),
    completed_at: z.int().optional(),
    error: z.object({ code: z.string(), message: z.string() }).nullable(),
    incomplete_details: z.object({ reason: z.literal("max_output_tokens") }).nullable(),
    model: z.string().meta({ description: "The name the request sent." }),
    output: z.array(ResponseOutputItem).meta({ description: "The assistant's message (when it wrote text, or wrote nothing at all), then its function calls." }),
    output_text: z.string().meta({ description: "The text of the output's messages, joined (as the openai SDK computes it)." }),
    usage: ResponseUsage.optional().meta({ description: "Once the response has ended (absent from response.created and response.in_progress)." }),
    store: z.literal(false).meta({ description: "Responses are never stored." }),
    previous_response_id: z.null(),
  })
  .loose()
  .meta({
    id: "Response",
    description:
      "The request's settings are given back too: instructions, max_output_tokens, metadata, parallel_tool_calls, temperature, text, tool_choice, tools, top_p, truncation, and user, safety_identifier, prompt_cache_key when sent.",
  });
const ResponseStreamEvent = z.object({ type: z.string(), sequence_number: z.int() }).loose().meta({
  id: "ResponseStreamEvent",
  description:
    "An `event: <type>` and its `data:`: response.created, response.in_progress, response.output_item.added, response.content_part.added, response.output_text.delta, response.output_text.done, response.content_part.done, response.function_call_arguments.delta, response.function_call_arguments.done, response.output_item.done, then response.completed (response.incomplete at max_output_tokens); a failure after the stream began: error, then response.failed.",
});

const LegacyLogprobs = z
  .strictObject({
    tokens: z.array(z.string()),
    token_logprobs: z.array(z.number()),
    top_logprobs: z.array(z.record(z.string(), z.number())),
    text_offset: z.array(z.int()),
  })
  .nullable()
  .meta({
    id: "LegacyLogprobs",
    description: "With logprobs: n, the generated tokens, their log probabilities, n alternatives each and where each starts in the text; null otherwise.",
  });

/** A legacy completion as answered (streamed: each chunk has this shape with the text so far's next piece). */
export const TextCompletion = z
  .strictObject({
    id: z.string(),
    object: z.literal("text_completion"),
    created: z.int(),
    model: z.string(),
    system_fingerprint: fingerprint,
    choices: z.array(z.strictObject({ text: z.string(), index: z.int(), logprobs: LegacyLogprobs, finish_reason: z.enum(["stop", "length"]).nullable() })),
    usage: Usage.optional().meta({ description: "On the whole answer, and on a stream's last chunk (with no choices) when stream_options.include_usage is true." }),
  })
  .meta({ id: "TextCompletion" });

export const EmbeddingList = z
  .strictObject({
    object: z.literal("list"),
    model: z.string(),
    data: z.array(
      z.strictObject({
        object: z.literal("embedding"),
        index: z.int(),
        embedding: z.union([z.array(z.number()), z.string()]).meta({ description: "The vector; with encoding_format base64, its little-endian float32 bytes in base64." }),
      }),
    ),
    usage: z.strictObject({ prompt_tokens: z.int(), total_tokens: z.int() }),
  })
  .meta({ id: "EmbeddingList" });

export const ModelObject = z.object({ id: z.string(), object: z.literal("model"), created: z.int(), owned_by: z.string() }).meta({ id: "Model" });

export const ModelList = z
  .object({
    object: z.literal("list"),
    data: z.array(ModelObject),
    models: z
      .array(
        z.object({
          id: z.string(),
          name: z.string(),
          aliases: z
            .array(z.string())
            .meta({ description: "Other names a request's model may give for it (the operator's catalog); empty for the built-in ids and whisper models." }),
          status: z.enum(MODEL_STATUSES).meta({
            description:
              "available: a replica is ready; loading: one is being loaded; placeable: none is loaded and a node has room for one; too_large: no node could ever hold it; unavailable: none is loaded and none can be placed now.",
          }),
          progress: z.number().min(0).max(1).optional().meta({ description: "While loading: how far its furthest replica is, 0 to 1 (the weights' download, then the load)." }),
          gpu_type: z.string(),
          memory_gb: z.number(),
          capabilities: z.array(z.string()).meta({
            description:
              "What the agents serving it can do: chat, sampling (top_p, seed, stop, penalties, logit_bias…), response_format, logprobs, n, completions, embeddings, tools; empty while none serves it.",
          }),
        }),
      )
      .meta({ description: "The same models with their availability in the fleet, the strongest hardware serving each, and its capabilities." }),
  })
  .meta({ id: "ModelList" });

const wholeIn = (min: number, max: number, description: string) => z.int().min(min).max(max).meta({ description });
/** One entry of the operator's model catalog, as `--catalog`'s file and the dashboard's PUT give it (models/operator-catalog.ts checks it). */
const CatalogEntry = z
  .strictObject({
    id: z.string().meta({ description: "The canonical id: 1 to 128 letters, digits, '.', ':', '_', '-' or '/', starting with a letter or digit." }),
    source: z.string().meta({
      description: "hf:<org>/<repo>:<quant>, hf:<org>/<repo>/<file>.gguf[#revision] (a split GGUF by any part: stored as its first) or an absolute path on the nodes.",
    }),
    aliases: z
      .array(z.string())
      .max(CATALOG_LIMITS.aliases)
      .optional()
      .meta({ description: "Other names for it, as ids are written; ids and aliases are unique across the catalog. Default none." }),
    context_size: wholeIn(CATALOG_LIMITS.contextSize.min, CATALOG_LIMITS.contextSize.max, `Context tokens per sequence. Default ${CATALOG_DEFAULTS.context_size}.`).optional(),
    sequences: wholeIn(CATALOG_LIMITS.sequences.min, CATALOG_LIMITS.sequences.max, `Parallel sequences of a replica. Default ${CATALOG_DEFAULTS.sequences}.`).optional(),
    min_replicas: wholeIn(0, CATALOG_LIMITS.replicas, `Replicas kept loaded. Default ${CATALOG_DEFAULTS.min_replicas}.`).optional(),
    max_replicas: wholeIn(1, CATALOG_LIMITS.replicas, `Most replicas, at least min_replicas. Default ${CATALOG_DEFAULTS.max_replicas}.`).optional(),
    idle_unload_s: wholeIn(0, CATALOG_LIMITS.idleUnloadS, `Seconds idle after which a replica's memory may be taken back. Default ${CATALOG_DEFAULTS.idle_unload_s}.`).optional(),
    memory_bytes: wholeIn(1, CATALOG_LIMITS.memoryBytes, "Bytes a replica needs, instead of the estimate from the GGUF. Default none.").optional(),
    owned_by: z.string().min(1).max(CATALOG_LIMITS.labelLength).optional().meta({ description: 'owned_by in GET /v1/models. Default "kiln".' }),
    name: z.string().min(1).max(CATALOG_LIMITS.labelLength).optional().meta({ description: "A human name for shape B of GET /v1/models. Default the id." }),
    speculative: z.string().max(MAX_SPECULATION_CHARS).optional().meta({
      description:
        'Speculative decoding on its replicas: "lookup" (prompt lookup) or "draft:<source>" (a draft model with the same vocabulary; <source> as source is written, stored in the same canonical form). Greedy output is unchanged. Default none.',
    }),
  })
  .meta({ id: "CatalogEntry" });
const CatalogBody = z
  .strictObject({ models: z.array(CatalogEntry).min(1).max(CATALOG_LIMITS.entries) })
  .meta({ id: "Catalog", description: "The operator's model catalog: the same JSON as the --catalog file." });
const StoredCatalogBody = z
  .object({
    active: z.boolean().meta({ description: "Whether an operator's catalog is in force (false: the built-in ids are served, and models is empty)." }),
    version: z.int().meta({ description: "Raised by every write; 0 until the first." }),
    updated_at: z.int().nullable().meta({ description: "When it was last written, Unix seconds; null until the first write." }),
    models: z.array(CatalogEntry).meta({ description: "The entries with their defaults applied and their sources in canonical form." }),
  })
  .meta({ id: "StoredCatalog" });

const FleetView = z
  .object({
    catalog_active: z.boolean().meta({ description: "Whether an operator's catalog is in force (without one nothing is placed)." }),
    nodes: z.array(
      z.object({
        node_id: z.string(),
        connected_at: z.number().meta({ description: "When its stream opened, ms since the epoch." }),
        placeable: z.boolean().meta({ description: "It takes replicas the scheduler places (an agent without --serve); false: it serves its --serve list (see pools)." }),
        draining: z.boolean(),
        distrusted: z.object({ reason: z.string(), at: z.number() }).nullable(),
        devices: z
          .array(z.object({ name: z.string(), total_bytes: z.number(), free_bytes: z.number() }))
          .meta({ description: "The devices a placeable node offers (its GPUs, or its memory on a CPU node, under --memory-budget); free as placement counts it." }),
        replicas: z.array(
          z.object({
            model: z.string(),
            state: z.enum(["loading", "ready", "unloading"]),
            progress: z.number().meta({ description: "0–1 while loading; 1 once ready." }),
            bytes: z.array(z.number()).meta({ description: "Bytes it holds on each device, by device index." }),
            inflight: z.number().meta({ description: "Requests its pool answers now." }),
            slots: z.number().meta({ description: "Its pool's slots (0 until ready)." }),
            last_used_at: z.number().meta({ description: "When it last took a request (its load's time until the first), ms since the epoch." }),
            pinned: z.boolean().meta({ description: "Pinned by the operator on this scheduler: placement never unloads it." }),
          }),
        ),
        pools: z.array(z.object({ models: z.array(z.string()), slots: z.number(), inflight: z.number() })),
      }),
    ),
    models: z.array(
      z.object({
        id: z.string(),
        aliases: z.array(z.string()),
        status: z.enum(MODEL_STATUSES),
        replicas: z.number().meta({ description: "Replicas loaded or loading on the connected nodes (a --serve node's pool counts as one)." }),
        ready: z.number().meta({ description: "Of those, the ones ready." }),
        min_replicas: z.number(),
        max_replicas: z.number(),
      }),
    ),
  })
  .meta({ id: "FleetView" });

const StoredMcpServer = McpServerConfigBody.extend({ id: z.string(), created_at: z.int(), updated_at: z.int() }).meta({ id: "McpServer" });
const McpTestResult = z
  .object({
    server_id: z.string(),
    status: z.literal("ok"),
    latency_ms: z.number(),
    resources: z.array(z.object({ uri: z.string(), name: z.string(), description: z.string().optional(), mimeType: z.string().optional() })),
    tools: z.array(z.object({ name: z.string(), description: z.string().optional(), inputSchema: z.unknown().optional() })),
  })
  .meta({ id: "McpTestResult" });
const SecretNames = z.object({ object: z.literal("list").optional(), data: z.array(z.object({ name: z.string() }).loose()) });

const json = (schema: z.ZodType, description: string) => ({ description, content: { "application/json": { schema } } });
const text = (description: string, type = "text/plain") => ({ description, content: { [type]: { schema: z.string() } } });
const noContent = { description: "Done; no body." };
const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, json(ErrorBody, ERROR_MEANING[s] ?? "An error.")]));
const ERROR_MEANING: Record<number, string> = {
  400: "The request is invalid; param names the field.",
  401: "The key (or admin token) is missing or wrong.",
  403: "The key's tier does not allow this.",
  404: "Not found.",
  409: "The request conflicts with the state of what it names; the message says what.",
  413: "The body is larger than --max-body.",
  429: "Rate limited (see the x-ratelimit-* and Retry-After headers).",
  502: "The agent serving the request failed.",
  503: "No agent serves the model right now, or the queue is full.",
};
const idParam = (name: string) => z.object({ [name]: z.string() });
const accountParam = z.object({ account: z.string() });

/** Every route of the scheduler's HTTP app. */
function routes(): RouteConfig[] {
  const key = [{ apiKey: [] }];
  const admin = [{ adminToken: [] }];
  const v1 = (r: Omit<RouteConfig, "security">): RouteConfig => ({ ...r, security: key });
  const adminRoute = (r: Omit<RouteConfig, "security" | "tags">): RouteConfig => ({ ...r, security: admin, tags: ["admin"] });
  return [
    { method: "get", path: "/healthz", summary: "Liveness", tags: ["operations"], responses: { 200: json(z.object({ status: z.literal("ok") }), "The process serves.") } },
    {
      method: "get",
      path: "/readyz",
      summary: "Readiness",
      tags: ["operations"],
      responses: {
        200: json(z.object({ ready: z.boolean(), checks: z.record(z.string(), z.boolean()) }), "Ready."),
        503: json(z.object({ ready: z.boolean(), checks: z.record(z.string(), z.boolean()) }), "Not ready."),
      },
    },
    {
      method: "get",
      path: "/metrics",
      summary: "Prometheus metrics",
      description:
        "The fleet-wide series, without a credential; with `Authorization: Bearer <--metrics-token>`, the per-account series too (`--metrics-per-account`). A wrong token is a 401.",
      tags: ["operations"],
      responses: { 200: text("Prometheus text format."), 401: json(ErrorBody, "The Authorization header is not the metrics token.") },
    },
    {
      method: "get",
      path: "/v1/openapi.json",
      summary: "This document",
      tags: ["operations"],
      responses: { 200: json(z.object({ openapi: z.string() }).loose(), "The OpenAPI 3.1 document.") },
    },
    v1({
      method: "post",
      path: "/v1/chat/completions",
      summary: "Create a chat completion",
      tags: ["chat"],
      request: { body: { required: true, content: { "application/json": { schema: ChatCompletionRequest } } } },
      responses: {
        200: {
          description:
            "The completion; with stream: true, server-sent events of chat.completion.chunk objects ending with data: [DONE]. Unknown request members are listed in x-kiln-ignored-fields.",
          headers: { "x-kiln-ignored-fields": { description: "The request's members this service ignored (a newer client's fields).", schema: { type: "string" } } },
          content: { "application/json": { schema: ChatCompletionResponse }, "text/event-stream": { schema: ChatCompletionChunk } },
        },
        ...errors(400, 401, 413, 429, 502, 503),
      },
    }),
    v1({
      method: "post",
      path: "/v1/responses",
      summary: "Create a response (OpenAI's Responses API)",
      description:
        "The chat route's engine path: instructions and input items become its conversation; function tools, tool_choice, text.format (json_schema through the grammar) and the sampling fields are the chat request's. Nothing is stored: store: true and previous_response_id are refused, as are built-in tools, image and file inputs, reasoning, background and include.",
      tags: ["chat"],
      request: { body: { required: true, content: { "application/json": { schema: ResponsesRequest } } } },
      responses: {
        200: {
          description: "The response; with stream: true, its typed server-sent events (no data: [DONE]). Unknown request members are listed in x-kiln-ignored-fields.",
          headers: { "x-kiln-ignored-fields": { description: "The request's members this service ignored (a newer client's fields).", schema: { type: "string" } } },
          content: { "application/json": { schema: ResponseObject }, "text/event-stream": { schema: ResponseStreamEvent } },
        },
        ...errors(400, 401, 413, 429, 502, 503),
      },
    }),
    ...(["get", "delete"] as const).map((method) =>
      v1({
        method,
        path: "/v1/responses/{id}",
        summary: method === "get" ? "Retrieve a stored response" : "Delete a stored response",
        description: "No response is stored, so this is always 404 response_not_found.",
        tags: ["chat"],
        request: { params: idParam("id") },
        responses: errors(401, 404, 429),
      }),
    ),
    ...messagesOpenApi(),
    v1({
      method: "post",
      path: "/v1/completions",
      summary: "Create a completion (legacy prompt API)",
      tags: ["chat"],
      request: { body: { required: true, content: { "application/json": { schema: LegacyCompletionRequest } } } },
      responses: {
        200: {
          description: "The prompt continued as it is (no chat template); with stream: true, server-sent events of text_completion chunks ending with data: [DONE].",
          headers: { "x-kiln-ignored-fields": { description: "The request's members this service ignored.", schema: { type: "string" } } },
          content: { "application/json": { schema: TextCompletion }, "text/event-stream": { schema: TextCompletion } },
        },
        ...errors(400, 401, 413, 429, 502, 503),
      },
    }),
    v1({
      method: "post",
      path: "/v1/embeddings",
      summary: "Create embeddings",
      tags: ["embeddings"],
      request: { body: { required: true, content: { "application/json": { schema: EmbeddingsRequest } } } },
      responses: { 200: json(EmbeddingList, "One embedding per input, in order."), ...errors(400, 401, 413, 429, 502, 503) },
    }),
    ...(["transcriptions", "translations"] as const).map((task) =>
      v1({
        method: "post",
        path: `/v1/audio/${task}`,
        summary: task === "transcriptions" ? "Transcribe audio" : "Translate audio into English (or target_language)",
        tags: ["audio"],
        request: { body: { required: true, content: { "multipart/form-data": { schema: AudioRequest(task) } } } },
        responses: {
          200: {
            description:
              "The transcript in response_format: json, verbose_json, text, srt or vtt; with stream: true, server-sent transcript.text.delta events, then transcript.text.done.",
            content: {
              "application/json": { schema: AudioJson },
              "text/plain": { schema: z.string() },
              "application/x-subrip": { schema: z.string() },
              "text/vtt": { schema: z.string() },
              "text/event-stream": { schema: z.string() },
            },
          },
          ...errors(400, 401, 413, 429, 502, 503, 507),
        },
      }),
    ),
    v1({
      method: "get",
      path: "/v1/usage",
      summary: "The account's usage by day and model",
      tags: ["usage"],
      request: { query: usageQuery },
      responses: { 200: json(UsageReport, "Requests, tokens and audio seconds per UTC day and model, oldest first."), ...errors(400, 401, 429) },
    }),
    v1({
      method: "get",
      path: "/v1/models",
      summary: "List the models",
      tags: ["models"],
      responses: { 200: json(ModelList, "Every model of the catalog."), ...errors(401, 429) },
    }),
    v1({
      method: "get",
      path: "/v1/models/{id}",
      summary: "One model",
      tags: ["models"],
      request: { params: idParam("id") },
      responses: { 200: json(ModelObject, "The model."), ...errors(401, 404, 429) },
    }),
    v1({
      method: "post",
      path: "/v1/mcp/test",
      summary: "Test one of the account's MCP configurations",
      tags: ["mcp"],
      request: { body: { required: true, content: { "application/json": { schema: McpTestRequest } } } },
      responses: { 200: json(McpTestResult, "The server answered; its resources and tools."), ...errors(400, 401, 403, 404, 429, 502) },
    }),
    v1({
      method: "get",
      path: "/v1/mcp/servers",
      summary: "The account's MCP configurations",
      tags: ["mcp"],
      responses: { 200: json(z.object({ object: z.literal("list"), data: z.array(StoredMcpServer) }), "The configurations."), ...errors(401, 403, 429) },
    }),
    v1({
      method: "post",
      path: "/v1/mcp/servers",
      summary: "Store an MCP configuration",
      tags: ["mcp"],
      request: { body: { required: true, content: { "application/json": { schema: McpServerConfigBody } } } },
      responses: { 201: json(StoredMcpServer, "Stored."), ...errors(400, 401, 403, 413, 429) },
    }),
    v1({
      method: "get",
      path: "/v1/mcp/servers/{id}",
      summary: "One MCP configuration",
      tags: ["mcp"],
      request: { params: idParam("id") },
      responses: { 200: json(StoredMcpServer, "The configuration."), ...errors(401, 403, 404, 429) },
    }),
    v1({
      method: "put",
      path: "/v1/mcp/servers/{id}",
      summary: "Replace an MCP configuration",
      tags: ["mcp"],
      request: { params: idParam("id"), body: { required: true, content: { "application/json": { schema: McpServerConfigBody } } } },
      responses: { 200: json(StoredMcpServer, "Replaced."), ...errors(400, 401, 403, 404, 413, 429) },
    }),
    v1({
      method: "delete",
      path: "/v1/mcp/servers/{id}",
      summary: "Delete an MCP configuration",
      tags: ["mcp"],
      request: { params: idParam("id") },
      responses: { 204: noContent, ...errors(401, 403, 404, 429) },
    }),
    v1({
      method: "get",
      path: "/v1/mcp/secrets",
      summary: "The names of the account's secrets (never their values)",
      tags: ["mcp"],
      responses: { 200: json(SecretNames, "The names."), ...errors(401, 403, 429) },
    }),
    v1({
      method: "put",
      path: "/v1/mcp/secrets/{name}",
      summary: "Set a secret (write-only)",
      tags: ["mcp"],
      request: { params: idParam("name"), body: { required: true, content: { "application/json": { schema: SecretValueRequest } } } },
      responses: { 200: json(z.object({ name: z.string() }), "Stored."), ...errors(400, 401, 403, 413, 429) },
    }),
    v1({
      method: "delete",
      path: "/v1/mcp/secrets/{name}",
      summary: "Delete a secret",
      tags: ["mcp"],
      request: { params: idParam("name") },
      responses: { 204: noContent, ...errors(401, 403, 404, 429) },
    }),
    { method: "get", path: "/dashboard", summary: "The dashboard page", tags: ["admin"], responses: { 200: text("The page.", "text/html") } },
    {
      method: "get",
      path: "/dashboard/{name}",
      summary: "The dashboard's files",
      tags: ["admin"],
      request: { params: idParam("name") },
      responses: { 200: text("A file of the page."), 404: json(ErrorBody, "No such file.") },
    },
    adminRoute({
      method: "get",
      path: "/admin/api/session",
      summary: "What the dashboard offers",
      responses: {
        200: json(z.object({ tiers: z.array(z.string()), server_types: z.array(z.string()), stdio_servers: z.array(z.string()) }), "Tiers, server types, stdio servers."),
        ...errors(401, 404),
      },
    }),
    adminRoute({
      method: "get",
      path: "/admin/api/accounts",
      summary: "Accounts and their keys",
      responses: {
        200: json(
          z.object({
            data: z.array(
              z.object({
                name: z.string(),
                tier: z.string(),
                keys: z.array(
                  z.object({
                    id: z.string(),
                    tier: z.string(),
                    rpm: z.int().nullable(),
                    created_at: z.int(),
                    expires_at: z.int().nullable(),
                    state: z.enum(["active", "revoked", "expired"]),
                  }),
                ),
              }),
            ),
          }),
          "The accounts.",
        ),
        ...errors(401, 404),
      },
    }),
    adminRoute({
      method: "post",
      path: "/admin/api/keys",
      summary: "Create a key (its token is shown once)",
      request: { body: { required: true, content: { "application/json": { schema: CreateKeyRequest } } } },
      responses: { 201: json(z.object({ id: z.string(), token: z.string() }), "The key."), ...errors(400, 401, 404, 413) },
    }),
    adminRoute({ method: "delete", path: "/admin/api/keys/{id}", summary: "Revoke a key", request: { params: idParam("id") }, responses: { 204: noContent, ...errors(401, 404) } }),
    adminRoute({
      method: "get",
      path: "/admin/api/accounts/{account}/mcp",
      summary: "An account's MCP configurations",
      request: { params: accountParam },
      responses: { 200: json(z.object({ data: z.array(StoredMcpServer) }), "The configurations."), ...errors(400, 401, 404) },
    }),
    adminRoute({
      method: "post",
      path: "/admin/api/accounts/{account}/mcp",
      summary: "Store an MCP configuration for an account",
      request: { params: accountParam, body: { required: true, content: { "application/json": { schema: McpServerConfigBody } } } },
      responses: { 201: json(StoredMcpServer, "Stored."), ...errors(400, 401, 404, 413) },
    }),
    adminRoute({
      method: "put",
      path: "/admin/api/accounts/{account}/mcp/{id}",
      summary: "Replace an account's MCP configuration",
      request: { params: accountParam.extend({ id: z.string() }), body: { required: true, content: { "application/json": { schema: McpServerConfigBody } } } },
      responses: { 200: json(StoredMcpServer, "Replaced."), ...errors(400, 401, 404, 413) },
    }),
    adminRoute({
      method: "delete",
      path: "/admin/api/accounts/{account}/mcp/{id}",
      summary: "Delete an account's MCP configuration",
      request: { params: accountParam.extend({ id: z.string() }) },
      responses: { 204: noContent, ...errors(400, 401, 404) },
    }),
    adminRoute({
      method: "post",
      path: "/admin/api/accounts/{account}/mcp/{id}/test",
      summary: "Test an account's MCP configuration",
      request: { params: accountParam.extend({ id: z.string() }) },
      responses: { 200: json(McpTestResult, "The server answered."), ...errors(400, 401, 404, 502) },
    }),
    adminRoute({
      method: "get",
      path: "/admin/api/accounts/{account}/usage",
      summary: "An account's usage by day and model",
      request: { params: accountParam, query: usageQuery },
      responses: { 200: json(UsageReport, "As GET /v1/usage reports it to the account's keys."), ...errors(400, 401) },
    }),
    adminRoute({
      method: "get",
      path: "/admin/api/nodes",
      summary: "The nodes: their models and slots, what the scheduler observed of them, and whether one was drained for its reports",
      responses: {
        200: json(
          z.object({
            data: z.array(
              z.object({
                node_id: z.string(),
                connected: z.boolean().meta({ description: "False for a drained node that is no longer connected (listed until the scheduler restarts)." }),
                connected_at: z.number().meta({ description: "When its (last) stream opened, ms since the epoch." }),
                draining: z.boolean(),
                distrusted: z
                  .object({ reason: z.string(), at: z.number() })
                  .nullable()
                  .meta({ description: "Why and since when (ms since the epoch) the node was drained for reports past the scheduler's bounds; null when it was not." }),
                models: z.array(z.string()),
                slots: z.number(),
                inflight: z.number(),
                ttft_ms: z.number().nullable(),
                tokens_per_second: z.number().nullable(),
              }),
            ),
          }),
          "The nodes.",
        ),
        ...errors(401),
      },
    }),
    adminRoute({
      method: "get",
      path: "/admin/api/catalog",
      summary: "The operator's model catalog",
      responses: { 200: json(StoredCatalogBody, "The catalog in force, shared by every scheduler on the database."), ...errors(401) },
    }),
    adminRoute({
      method: "put",
      path: "/admin/api/catalog",
      summary: "Replace the operator's model catalog",
      request: { body: { required: true, content: { "application/json": { schema: CatalogBody } } } },
      responses: { 200: json(StoredCatalogBody, "Stored and served; the other schedulers take it up within 2 s."), ...errors(400, 401, 413) },
    }),
    adminRoute({
      method: "delete",
      path: "/admin/api/catalog",
      summary: "Remove the operator's model catalog (the built-in ids are served again)",
      responses: { 204: noContent, ...errors(401) },
    }),
    adminRoute({
      method: "get",
      path: "/admin/api/fleet",
      summary: "The fleet: each node's devices and replicas, each catalog model's status and replicas",
      responses: { 200: json(FleetView, "The fleet as this scheduler sees it."), ...errors(401) },
    }),
    adminRoute({
      method: "post",
      path: "/admin/api/fleet/pins",
      summary: "Pin a replica of a catalog model to a node (loaded there when it holds none)",
      description:
        "Placement never unloads a pinned replica. A node holding none gets one loaded when the plan fits it there (its idle, unpinned replicas unloaded first, as `evicted` says). Pins are this scheduler's, in its memory: a restart forgets them.",
      request: { body: { required: true, content: { "application/json": { schema: FleetPinRequest } } } },
      responses: {
        200: json(
          z.object({ node: z.string(), model: z.string(), pinned: z.literal(true), state: z.enum(["loading", "ready"]), evicted: z.array(z.string()) }),
          "The node's replica is pinned.",
        ),
        202: json(
          z.object({ node: z.string(), model: z.string(), pinned: z.literal(true), state: z.literal("loading"), evicted: z.array(z.string()) }),
          "Pinned, and its load ordered (after the unloads `evicted` names).",
        ),
        ...errors(400, 401, 404, 409, 413, 503),
      },
    }),
    adminRoute({
      method: "delete",
      path: "/admin/api/fleet/pins",
      summary: "Unpin a replica (placement may unload it again)",
      request: { body: { required: true, content: { "application/json": { schema: FleetPinRequest } } } },
      responses: { 204: noContent, ...errors(400, 401, 404, 413) },
    }),
    adminRoute({
      method: "post",
      path: "/admin/api/fleet/unload",
      summary: "Unload a replica",
      description:
        "It takes no new request at once; its node lets the requests it answers finish (stopping them after a minute's grace), then frees it. One that answers requests is refused (409 `replica_busy`) unless `force`.",
      request: { body: { required: true, content: { "application/json": { schema: FleetUnloadRequest } } } },
      responses: {
        202: json(
          z.object({ node: z.string(), model: z.string(), state: z.literal("unloading"), unpinned: z.boolean(), inflight: z.number() }),
          "UnloadModel sent; `unpinned`: it was pinned; `inflight`: requests it was answering.",
        ),
        ...errors(400, 401, 404, 409, 413),
      },
    }),
    adminRoute({
      method: "post",
      path: "/admin/api/fleet/nodes/{id}/drain",
      summary: "Drain a node",
      description:
        "It gets no new work from this scheduler at once and is sent Drain: its link to this scheduler lets its running requests finish (within `deadline_s`), then closes; the agent does not dial this scheduler again until it restarts. The body is optional.",
      request: { params: idParam("id"), body: { required: false, content: { "application/json": { schema: FleetDrainRequest } } } },
      responses: {
        202: json(
          z.object({
            node: z.string(),
            draining: z.literal(true),
            deadline_s: z.number(),
            already: z.boolean().meta({ description: "It was drained so before; nothing was sent." }),
          }),
          "Drain sent.",
        ),
        ...errors(400, 401, 404, 413),
      },
    }),
    adminRoute({
      method: "get",
      path: "/admin/api/accounts/{account}/secrets",
      summary: "The names of an account's secrets",
      request: { params: accountParam },
      responses: { 200: json(SecretNames, "The names."), ...errors(400, 401, 404) },
    }),
    adminRoute({
      method: "put",
      path: "/admin/api/accounts/{account}/secrets/{name}",
      summary: "Set an account's secret",
      request: { params: accountParam.extend({ name: z.string() }), body: { required: true, content: { "application/json": { schema: SecretValueRequest } } } },
      responses: { 200: json(z.object({ name: z.string() }), "Stored."), ...errors(400, 401, 404, 413) },
    }),
    adminRoute({
      method: "delete",
      path: "/admin/api/accounts/{account}/secrets/{name}",
      summary: "Delete an account's secret",
      request: { params: accountParam.extend({ name: z.string() }) },
      responses: { 204: noContent, ...errors(400, 401, 404) },
    }),
  ];
}

let cached: object | undefined;

/** The document (generated once). */
export function openApiDocument(version: string): object {
  if (cached) return cached;
  const registry = new OpenAPIRegistry();
  registry.registerComponent("securitySchemes", "apiKey", { type: "http", scheme: "bearer", description: "An API key (kiln keys create)." });
  registry.registerComponent("securitySchemes", "adminToken", {
    type: "http",
    scheme: "bearer",
    description: "The scheduler's --admin-token; without one the admin API answers 404.",
  });
  registry.registerComponent("securitySchemes", "anthropicApiKey", {
    type: "apiKey",
    in: "header",
    name: "x-api-key",
    description: "An API key in Anthropic's header (/v1/messages).",
  });
  for (const route of routes()) registry.registerPath(route);
  cached = new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: {
      title: "Kiln scheduler",
      version,
      description: "OpenAI-compatible chat completions over a fleet of Kiln agents, API keys, MCP server configurations and the admin API.",
    },
  });
  return cached;
}

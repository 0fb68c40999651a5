/**
 * `POST /v1/chat/completions` bodies checked against the request's schema (schema.ts) and turned into
 * the fleet's request: developer messages as system, text parts joined, sampling gathered, the
 * default `max_tokens` applied. Every failure is an `InvalidRequestError` naming the field (core/schema.ts).
 */
import { checkToolOrder, MAX_LOGPROB_ENTRIES, type Sampling } from "../../core/chat.js";
import { InvalidRequestError } from "../../core/errors.js";
import { parseBody } from "../../core/schema.js";
import type { ChatMessage, CompletionRequest } from "../fleet/index.js";
import type { z } from "zod";
import { BUILTIN_MODEL_NAMES, ChatCompletionRequest, IGNORED_KNOWN, KNOWN_FIELDS, resolveModel, type GENERATION_FIELDS, type ModelNames } from "./schema.js";

export interface ChatCompletionBody extends CompletionRequest {
  /** The name the client sent (an id or an alias), which the answer carries; `model` is the canonical id it names. */
  requestedModel: string;
  stream: boolean;
  /** `stream_options.include_usage`: a last chunk carrying `usage`. */
  includeUsage: boolean;
  /** Top-level members this service does not know (or knows and has no use for), in the order sent. */
  ignored: string[];
}

export interface ChatValidationOptions {
  /** `max_tokens` when the request gives none (the agent also caps it at what the context has left). Default: none. */
  defaultMaxTokens?: number;
  /** The names `model` may give (the scheduler's catalog). Default the built-in ids. */
  models?: ModelNames;
}

export function validateChatCompletion(body: unknown, options: ChatValidationOptions = {}): ChatCompletionBody {
  const model = resolveModel(body, options.models ?? BUILTIN_MODEL_NAMES);
  const b = parseBody(ChatCompletionRequest, body);
  const messages = b.messages.map((m): ChatMessage => {
    const text = typeof m.content === "string" ? m.content : (m.content ?? []).map((part) => part.text).join("");
    // a participant's name has no place in chat templates: it leads the text, as a transcript writes it
    // (not on the assistant's own turns, nor on a function's result: a prefill would be continued after the name)
    const named = m.name && m.role !== "assistant" && m.role !== "tool";
    return {
      role: m.role === "developer" ? "system" : m.role,
      content: named ? `${m.name}: ${text}` : text,
      ...(m.tool_calls?.length ? { toolCalls: m.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) } : {}),
      ...(m.role === "tool" ? { toolCallId: m.tool_call_id! } : {}),
    };
  });
  const order = checkToolOrder(messages);
  if (order) throw new InvalidRequestError("invalid_messages", `messages[${order.index}].${order.field}: ${order.message}`, `messages[${order.index}].${order.field}`);
  const ignored = Object.keys(body as object).filter((k) => !KNOWN_FIELDS.has(k) || IGNORED_KNOWN.has(k));
  const out: ChatCompletionBody = {
    model: model ?? b.model,
    requestedModel: b.model,
    messages,
    stream: b.stream ?? false,
    includeUsage: b.stream_options?.include_usage ?? false,
    ignored,
  };

  const limit = b.max_completion_tokens ?? b.max_tokens ?? options.defaultMaxTokens;
  if (limit !== undefined) out.maxTokens = limit;
  if (present(b.temperature)) out.temperature = b.temperature;

  const sampling = samplingOf(b);
  if (sampling) out.sampling = sampling;
  if (b.logprobs === true) out.logprobs = b.top_logprobs ?? 0;
  if (b.n && b.n > 1) out.n = b.n;
  checkLogprobBudget(out);
  const tools = b.tools ?? [];
  if (tools.length > 0 && b.tool_choice !== "none") {
    out.tools = tools.map((t) => ({
      name: t.function.name,
      ...(t.function.description ? { description: t.function.description } : {}),
      ...(t.function.parameters ? { parameters: t.function.parameters } : {}),
    }));
    const choice = b.tool_choice;
    if (choice === "required" || (typeof choice === "object" && choice !== null)) out.toolChoice = choice === "required" ? "required" : { name: choice.function.name };
    if (b.parallel_tool_calls === false) out.parallelToolCalls = false;
  }
  const format = b.response_format;
  if (format?.type === "json_object" || (format?.type === "json_schema" && !format.json_schema?.schema)) out.responseFormat = { type: "json_object" };
  else if (format?.type === "json_schema") out.responseFormat = { type: "json_schema", schema: format.json_schema!.schema! };
  return out;
}

/**
 * Refuses a non-streamed answer whose log probabilities would gather more than MAX_LOGPROB_ENTRIES
 * entries in the scheduler (stream it instead).
 */
export function checkLogprobBudget(b: { logprobs?: number; n?: number; maxTokens?: number; stream: boolean }): void {
  if (b.logprobs === undefined) return;
  const n = b.n ?? 1;
  const entries = n * (b.maxTokens ?? Infinity) * (1 + b.logprobs);
  if (!b.stream && entries > MAX_LOGPROB_ENTRIES) {
    throw new InvalidRequestError(
      "invalid_logprobs",
      `logprobs: ${Number.isFinite(entries) ? entries : "unbounded"} log probabilities (choices × max_tokens × (1 + alternatives)) are more than a non-streamed answer holds (${MAX_LOGPROB_ENTRIES}); stream it, or set a lower max_tokens`,
      "logprobs",
    );
  }
}

/** The sampling fields of a generation request (GENERATION_FIELDS), or undefined when none is set. */
export function samplingOf(b: z.infer<z.ZodObject<typeof GENERATION_FIELDS>>): Sampling | undefined {
  const sampling: Sampling = {};
  const set = <K extends keyof Sampling>(key: K, value: Sampling[K] | null | undefined) => {
    if (value !== undefined && value !== null) sampling[key] = value;
  };
  set("topP", b.top_p);
  set("topK", b.top_k);
  set("minP", b.min_p);
  set("seed", b.seed);
  set("presencePenalty", b.presence_penalty);
  set("frequencyPenalty", b.frequency_penalty);
  set("repeatPenalty", b.repeat_penalty);
  if (b.logit_bias && Object.keys(b.logit_bias).length > 0) sampling.logitBias = b.logit_bias;
  const stop = typeof b.stop === "string" ? [b.stop] : b.stop;
  if (stop && stop.length > 0) sampling.stop = stop;
  return Object.keys(sampling).length > 0 ? sampling : undefined;
}

function present<T>(v: T | null | undefined): v is T {
  return v !== undefined && v !== null;
}

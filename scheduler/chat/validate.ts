/**
 * Validation of `POST /v1/chat/completions` bodies (README, "API": the request and its messages).
 * OpenAI's fields are either honoured or refused with a 400 naming them; a known field of the wrong
 * type is refused; unknown members (a newer client's fields) are accepted and reported back in
 * `ignored`, which the route sends as the `x-kiln-ignored-fields` header. Every failure is an
 * `InvalidRequestError` whose message starts with the offending field's path, which is also its `param`.
 */
import { InvalidRequestError } from "../../core/errors.js";
import { describeValue, jsonObject, missingField, wrongType } from "../../core/validate.js";
import { CHAT_ROLES, isChatRole, type Sampling } from "../../core/chat.js";
import { isCatalogModel } from "../../models/catalog.js";
import type { ChatMessage, CompletionRequest } from "../fleet/index.js";

export interface ChatCompletionBody extends CompletionRequest {
  stream: boolean;
  /** `stream_options.include_usage`: a last chunk carrying `usage`. */
  includeUsage: boolean;
  /** Top-level members this service does not know (or knows and has no use for), in the order sent. */
  ignored: string[];
}

export interface ChatValidationOptions {
  /** `max_tokens` when the request gives none (the agent also caps it at what the context has left). Default: none. */
  defaultMaxTokens?: number;
}

/**
 * The request's members this validator reads. Every other member is reported as ignored: a newer
 * client's fields, and OpenAI's that change nothing here (`user`, `metadata`, `parallel_tool_calls`
 * without tools).
 */
const HANDLED = new Set([
  "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "seed",
  "presence_penalty", "frequency_penalty", "repeat_penalty", "logit_bias", "stop", "stream", "stream_options",
  "n", "logprobs", "top_logprobs", "response_format", "tools", "tool_choice", "functions", "function_call",
  "store", "service_tier", "modalities", "audio", "prediction", "web_search_options", "reasoning_effort",
]);

/** Most stop texts, as OpenAI allows. */
const MAX_STOPS = 4;
/** Longest stop text, in characters. */
const MAX_STOP_LENGTH = 256;
/** Most `logit_bias` entries. */
const MAX_LOGIT_BIAS = 1024;

const present = (v: unknown): boolean => v !== undefined && v !== null;

/** 400 `unsupported_parameter`: a field this service does not implement (yet), named. */
function unsupported(field: string, what: string): never {
  throw new InvalidRequestError("unsupported_parameter", `${field}: ${what}`, field);
}

/** A finite number in [min, max], else a 400 naming `field`. */
function numberIn(b: Record<string, unknown>, field: string, min: number, max: number): number | undefined {
  const v = b[field];
  if (!present(v)) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v)) wrongType(field, `a number from ${min} to ${max}`, v);
  if (v < min || v > max) throw new InvalidRequestError(`invalid_${field}`, `${field}: ${v} is outside ${min} to ${max}`, field);
  return v;
}

/** An integer in [min, max], else a 400 naming `field`. */
function integerFrom(b: Record<string, unknown>, field: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = b[field];
  if (!present(v)) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`;
    throw new InvalidRequestError(`invalid_${field}`, `${field}: expected an integer ${range}, got ${describeValue(v)}`, field);
  }
  return v;
}

/** Largest `top_k` (llama.cpp reads it as a 32-bit signed integer). */
const MAX_TOP_K = 2 ** 31 - 1;
/** Largest `seed` (llama.cpp's seeds are 32-bit unsigned; a larger one would wrap, a negative one become 0). */
const MAX_SEED = 2 ** 32 - 1;

function validateMessages(raw: unknown): ChatMessage[] {
  if (!present(raw)) missingField("messages");
  if (!Array.isArray(raw)) wrongType("messages", "an array of messages", raw);
  if (raw.length === 0) throw new InvalidRequestError("invalid_messages", "messages: must hold at least one message", "messages");
  return raw.map((m: unknown, i: number) => {
    const at = `messages[${i}]`;
    if (typeof m !== "object" || m === null || Array.isArray(m)) wrongType(at, "an object with role and content", m);
    const { role, content, name, tool_calls: toolCalls } = m as Record<string, unknown>;
    if (!present(role)) missingField(`${at}.role`);
    if (typeof role !== "string") wrongType(`${at}.role`, "a string", role);
    if (role === "tool" || role === "function") unsupported(`${at}.role`, `"${role}" messages need tools, which this service does not support yet`);
    // OpenAI's `developer` messages are the system messages of its newer models.
    const mapped = role === "developer" ? "system" : role;
    if (!isChatRole(mapped)) throw new InvalidRequestError("invalid_role", `${at}.role: "${role}" is not one of ${[...CHAT_ROLES, "developer"].join(", ")}`, `${at}.role`);
    if (present(toolCalls)) unsupported(`${at}.tool_calls`, "tool calls are not supported yet");
    if (present(name)) unsupported(`${at}.name`, "participant names are not supported (the chat templates have no place for them)");
    return { role: mapped, content: messageText(content, `${at}.content`) };
  });
}

/** A message's content: a string, or an array of text parts joined. Other parts are refused by index. */
function messageText(content: unknown, at: string): string {
  if (!present(content)) missingField(at);
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) wrongType(at, "a string or an array of content parts", content);
  return content.map((part: unknown, j: number) => {
    const where = `${at}[${j}]`;
    if (typeof part !== "object" || part === null || Array.isArray(part)) wrongType(where, "a content part object", part);
    const { type, text } = part as Record<string, unknown>;
    if (type !== "text") {
      throw new InvalidRequestError("unsupported_content", `${where}: content parts of type ${describeValue(type)} are not supported; only "text"`, where);
    }
    if (typeof text !== "string") wrongType(`${where}.text`, "a string", text);
    return text;
  }).join("");
}

function validateStop(v: unknown): string[] | undefined {
  if (!present(v)) return undefined;
  const stops = typeof v === "string" ? [v] : v;
  if (!Array.isArray(stops) || stops.some((s) => typeof s !== "string")) wrongType("stop", "a string or an array of strings", v);
  if (stops.length > MAX_STOPS) throw new InvalidRequestError("invalid_stop", `stop: at most ${MAX_STOPS} sequences, got ${stops.length}`, "stop");
  for (const [i, s] of (stops as string[]).entries()) {
    if (s.length === 0 || s.length > MAX_STOP_LENGTH) throw new InvalidRequestError("invalid_stop", `stop[${i}]: must be 1 to ${MAX_STOP_LENGTH} characters`, "stop");
  }
  return stops.length > 0 ? (stops as string[]) : undefined;
}

function validateLogitBias(v: unknown): Record<string, number> | undefined {
  if (!present(v)) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) wrongType("logit_bias", "an object of token ids to numbers", v);
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > MAX_LOGIT_BIAS) throw new InvalidRequestError("invalid_logit_bias", `logit_bias: at most ${MAX_LOGIT_BIAS} tokens, got ${entries.length}`, "logit_bias");
  const out: Record<string, number> = {};
  for (const [id, bias] of entries) {
    if (!/^(0|[1-9]\d{0,9})$/.test(id)) throw new InvalidRequestError("invalid_logit_bias", `logit_bias: ${describeValue(id)} is not a token id`, "logit_bias");
    if (typeof bias !== "number" || !Number.isFinite(bias) || bias < -100 || bias > 100) {
      throw new InvalidRequestError("invalid_logit_bias", `logit_bias.${id}: expected a number from -100 to 100, got ${describeValue(bias)}`, "logit_bias");
    }
    out[id] = bias;
  }
  return entries.length > 0 ? out : undefined;
}

/** Refuses the OpenAI features this service does not implement, when a request asks for them. */
function refuseUnsupported(b: Record<string, unknown>): void {
  if (present(b.n) && b.n !== 1) {
    if (typeof b.n !== "number" || !Number.isInteger(b.n) || b.n < 1) throw new InvalidRequestError("invalid_n", `n: expected an integer of at least 1, got ${describeValue(b.n)}`, "n");
    unsupported("n", "more than one choice per request is not supported yet");
  }
  if (b.logprobs === true) unsupported("logprobs", "log probabilities are not supported yet");
  if (present(b.top_logprobs) && b.top_logprobs !== 0) unsupported("top_logprobs", "log probabilities are not supported yet");
  if (present(b.response_format)) {
    const type = typeof b.response_format === "object" && !Array.isArray(b.response_format) ? (b.response_format as Record<string, unknown>).type : undefined;
    if (type !== "text") unsupported("response_format", `${describeValue(type ?? b.response_format)} is not supported yet; only {"type": "text"}`);
  }
  if (Array.isArray(b.tools) ? b.tools.length > 0 : present(b.tools)) unsupported("tools", "tools are not supported yet");
  if (present(b.tool_choice) && b.tool_choice !== "none" && b.tool_choice !== "auto") unsupported("tool_choice", "tools are not supported yet");
  if (Array.isArray(b.functions) ? b.functions.length > 0 : present(b.functions)) unsupported("functions", "function calling is not supported yet");
  if (present(b.function_call) && b.function_call !== "none" && b.function_call !== "auto") unsupported("function_call", "function calling is not supported yet");
  if (b.store === true) unsupported("store", "completions are not stored by this service");
  if (present(b.service_tier) && b.service_tier !== "auto" && b.service_tier !== "default") unsupported("service_tier", `${describeValue(b.service_tier)} is not offered; the account's tier applies`);
  if (present(b.modalities)) {
    if (!Array.isArray(b.modalities)) wrongType("modalities", "an array", b.modalities);
    if (b.modalities.some((m) => m !== "text")) unsupported("modalities", "only text output is supported");
  }
  for (const field of ["audio", "prediction", "web_search_options", "reasoning_effort"]) if (present(b[field])) unsupported(field, "not supported by this service");
}

export function validateChatCompletion(body: unknown, options: ChatValidationOptions = {}): ChatCompletionBody {
  const b = jsonObject(body);

  if (!present(b.model)) missingField("model");
  if (typeof b.model !== "string") wrongType("model", "a string", b.model);
  if (!isCatalogModel(b.model)) throw new InvalidRequestError("model_not_found", `model: ${describeValue(b.model)} is not a model of this service (see GET /v1/models)`, "model");
  const messages = validateMessages(b.messages);
  refuseUnsupported(b);

  const ignored = Object.keys(b).filter((k) => !HANDLED.has(k));
  const out: ChatCompletionBody = { model: b.model, messages, stream: false, includeUsage: false, ignored };

  const maxTokens = integerFrom(b, "max_tokens", 1);
  const maxCompletionTokens = integerFrom(b, "max_completion_tokens", 1);
  if (maxTokens !== undefined && maxCompletionTokens !== undefined && maxTokens !== maxCompletionTokens) {
    throw new InvalidRequestError("invalid_max_tokens", `max_completion_tokens: ${maxCompletionTokens} differs from max_tokens ${maxTokens}; send one`, "max_completion_tokens");
  }
  const limit = maxCompletionTokens ?? maxTokens ?? options.defaultMaxTokens;
  if (limit !== undefined) out.maxTokens = limit;

  const temperature = numberIn(b, "temperature", 0, 2);
  if (temperature !== undefined) out.temperature = temperature;

  const sampling: Sampling = {};
  const set = <K extends keyof Sampling>(key: K, value: Sampling[K] | undefined) => { if (value !== undefined) sampling[key] = value; };
  set("topP", numberIn(b, "top_p", 0, 1));
  set("topK", integerFrom(b, "top_k", 0, MAX_TOP_K));
  set("minP", numberIn(b, "min_p", 0, 1));
  set("seed", integerFrom(b, "seed", 0, MAX_SEED));
  set("presencePenalty", numberIn(b, "presence_penalty", -2, 2));
  set("frequencyPenalty", numberIn(b, "frequency_penalty", -2, 2));
  const repeatPenalty = numberIn(b, "repeat_penalty", 0, 10);
  // llama.cpp divides the logits of repeated tokens by it: 0 would make them infinitely likely
  if (repeatPenalty === 0) throw new InvalidRequestError("invalid_repeat_penalty", "repeat_penalty: must be above 0", "repeat_penalty");
  set("repeatPenalty", repeatPenalty);
  set("logitBias", validateLogitBias(b.logit_bias));
  set("stop", validateStop(b.stop));
  if (Object.keys(sampling).length > 0) out.sampling = sampling;

  if (present(b.stream)) {
    if (typeof b.stream !== "boolean") wrongType("stream", "a boolean", b.stream);
    out.stream = b.stream;
  }
  if (present(b.stream_options)) {
    if (typeof b.stream_options !== "object" || Array.isArray(b.stream_options)) wrongType("stream_options", "an object", b.stream_options);
    const include = (b.stream_options as Record<string, unknown>).include_usage;
    if (present(include) && typeof include !== "boolean") wrongType("stream_options.include_usage", "a boolean", include);
    out.includeUsage = include === true;
  }
  return out;
}

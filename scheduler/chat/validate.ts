/**
 * Validation of `POST /v1/chat/completions` bodies (README, "API": the request and its messages).
 * Unknown members are ignored; known members of the wrong type are not. Every failure is an
 * `InvalidRequestError` whose message starts with the offending field's path.
 */
import { InvalidRequestError } from "../../core/errors.js";
import { jsonObject, missingField, wrongType } from "../../core/validate.js";
import { CHAT_ROLES, isChatRole } from "../../core/chat.js";
import { isCatalogModel } from "../../models/catalog.js";
import type { ChatMessage, CompletionRequest } from "../fleet/index.js";

export interface ChatCompletionBody extends CompletionRequest {
  stream: boolean;
  /** `stream_options.include_usage`: a last chunk carrying `usage`. */
  includeUsage: boolean;
}

export function validateChatCompletion(body: unknown): ChatCompletionBody {
  const b = jsonObject(body);

  if (b.model === undefined || b.model === null) missingField("model");
  if (typeof b.model !== "string") wrongType("model", "a string", b.model);
  if (!isCatalogModel(b.model)) throw new InvalidRequestError("model_not_found", `model: "${b.model}" is not a model of this service (see GET /v1/models)`, "model");

  if (b.messages === undefined || b.messages === null) missingField("messages");
  if (!Array.isArray(b.messages)) wrongType("messages", "an array of messages", b.messages);
  if (b.messages.length === 0) throw new InvalidRequestError("invalid_messages", "messages: must hold at least one message", "messages");
  const messages: ChatMessage[] = b.messages.map((m: unknown, i: number) => {
    const at = `messages[${i}]`;
    if (typeof m !== "object" || m === null || Array.isArray(m)) wrongType(at, "an object with role and content", m);
    const { role, content } = m as Record<string, unknown>;
    if (role === undefined || role === null) missingField(`${at}.role`);
    if (typeof role !== "string") wrongType(`${at}.role`, "a string", role);
    if (!isChatRole(role)) throw new InvalidRequestError("invalid_role", `${at}.role: "${role}" is not one of ${CHAT_ROLES.join(", ")}`, `${at}.role`);
    if (content === undefined || content === null) missingField(`${at}.content`);
    if (typeof content !== "string") wrongType(`${at}.content`, "a string", content);
    return { role, content };
  });

  const out: ChatCompletionBody = { model: b.model, messages, stream: false, includeUsage: false };

  if (b.max_tokens !== undefined && b.max_tokens !== null) {
    if (typeof b.max_tokens !== "number" || !Number.isInteger(b.max_tokens) || b.max_tokens < 1) {
      throw new InvalidRequestError("invalid_max_tokens", `max_tokens: expected an integer of at least 1, got ${JSON.stringify(b.max_tokens)}`, "max_tokens");
    }
    out.maxTokens = b.max_tokens;
  }

  if (b.temperature !== undefined && b.temperature !== null) {
    if (typeof b.temperature !== "number" || !Number.isFinite(b.temperature)) wrongType("temperature", "a number from 0 to 2", b.temperature);
    if (b.temperature < 0 || b.temperature > 2) throw new InvalidRequestError("invalid_temperature", `temperature: ${b.temperature} is outside 0 to 2`, "temperature");
    out.temperature = b.temperature;
  }

  if (b.stream !== undefined && b.stream !== null) {
    if (typeof b.stream !== "boolean") wrongType("stream", "a boolean", b.stream);
    out.stream = b.stream;
  }
  if (b.stream_options !== undefined && b.stream_options !== null) {
    if (typeof b.stream_options !== "object" || Array.isArray(b.stream_options)) wrongType("stream_options", "an object", b.stream_options);
    const include = (b.stream_options as Record<string, unknown>).include_usage;
    if (include !== undefined && include !== null && typeof include !== "boolean") wrongType("stream_options.include_usage", "a boolean", include);
    out.includeUsage = include === true;
  }
  return out;
}

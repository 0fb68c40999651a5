/** `POST /v1/chat/completions`: OpenAI's chat API on the generation route (generate.ts). */
import type { Hono } from "hono";
import {
  chunkBody,
  completionBody,
  completionId,
  toolCallsDelta,
  usageChunkBody,
  validateChatCompletion,
  type ChatCompletionBody,
  type ChatValidationOptions,
} from "../../chat/index.js";
import type { AppEnv } from "../env.js";
import { generationRoute, type GenerationApi, type GenerationDeps } from "./generate.js";

/** The indexes of a request's choices. */
const indexes = (body: { n?: number }): number[] => Array.from({ length: body.n ?? 1 }, (_, i) => i);

export function chatRoutes(deps: GenerationDeps, validation: ChatValidationOptions = {}): Hono<AppEnv> {
  const stream = (body: ChatCompletionBody, a: { id: string; created: number; model: string }) => ({ ...a, includeUsage: body.includeUsage });
  const api: GenerationApi<ChatCompletionBody> = {
    usageKind: "chat",
    validate: (body) => validateChatCompletion(body, { ...validation, ...(deps.models ? { models: deps.models } : {}) }),
    newId: completionId,
    answer: (_body, a, choices, done) => completionBody(a.id, a.created, a.model, choices, done),
    opening: (body, a) => indexes(body).map((i) => chunkBody(stream(body, a), i, { role: "assistant", content: "" })),
    textChunk: (body, a, index, text, logprobs) => chunkBody(stream(body, a), index, { content: text }, undefined, logprobs),
    toolCallChunk: (body, a, index, pieces) => chunkBody(stream(body, a), index, toolCallsDelta(pieces)),
    closing: (body, a, done) => [...indexes(body).map((i) => chunkBody(stream(body, a), i, {}, done)), ...(body.includeUsage ? [usageChunkBody(stream(body, a), done)] : [])],
  };
  return generationRoute(api, deps);
}

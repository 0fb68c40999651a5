/** `POST /v1/chat/completions`: OpenAI's chat API on the generation route (generate.ts). */
import type { Hono } from "hono";
import { chunkBody, completionBody, completionId, usageChunkBody, validateChatCompletion, type ChatCompletionBody, type ChatValidationOptions } from "../../chat/index.js";
import type { AppEnv } from "../env.js";
import { generationRoute, type GenerationApi, type GenerationDeps } from "./generate.js";

export function chatRoutes(deps: GenerationDeps, validation: ChatValidationOptions = {}): Hono<AppEnv> {
  const stream = (body: ChatCompletionBody, a: { id: string; created: number; model: string }) => ({ ...a, includeUsage: body.includeUsage });
  const api: GenerationApi<ChatCompletionBody> = {
    validate: (body) => validateChatCompletion(body, validation),
    newId: completionId,
    answer: (_body, a, text, done, logprobs) => completionBody(a.id, a.created, a.model, text, done, logprobs),
    opening: (body, a) => chunkBody(stream(body, a), { role: "assistant", content: "" }),
    textChunk: (body, a, text, logprobs) => chunkBody(stream(body, a), { content: text }, undefined, logprobs),
    closing: (body, a, done) => [chunkBody(stream(body, a), {}, done), ...(body.includeUsage ? [usageChunkBody(stream(body, a), done)] : [])],
  };
  return generationRoute(api, deps);
}

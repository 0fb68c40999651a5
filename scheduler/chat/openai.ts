/** The OpenAI-compatible shapes of chat completions (README, "API"). */
import { randomBytes } from "node:crypto";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function completionId(): string {
  return `chatcmpl-${randomBytes(12).toString("base64url")}`;
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

export function completionBody(id: string, created: number, model: string, content: string, finishReason: string, u: Usage) {
  return {
    id, object: "chat.completion", created, model,
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: finishReason }],
    usage: u,
  };
}

export function chunkBody(id: string, created: number, model: string, delta: { role?: "assistant"; content?: string }, finishReason: string | null) {
  return { id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, finish_reason: finishReason }] };
}

/** The last chunk of `stream_options.include_usage`: no choices, the usage. */
export function usageChunkBody(id: string, created: number, model: string, u: Usage) {
  return { id, object: "chat.completion.chunk", created, model, choices: [], usage: u };
}

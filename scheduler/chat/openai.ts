/** The OpenAI-compatible shapes of chat completions (README, "API"). */
import { randomId } from "../../core/ids.js";
import type { ToolCall } from "../../core/chat.js";
import type { TokenLogprob } from "../fleet/index.js";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** `cached_tokens`: prompt tokens whose KV cache the serving slot already held. */
  prompt_tokens_details: { cached_tokens: number };
}

/** What the agent reported at the end of a completion. */
export interface Done {
  finishReason: string;
  /** Each choice's, by index. */
  finishReasons: string[];
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  fingerprint: string;
}

export function completionId(): string {
  return `chatcmpl-${randomId(12)}`;
}

/** A function call's id, as the client sends it back with the call's result. */
export function toolCallId(): string {
  return `call_${randomId(12)}`;
}

export function usage(done: Done): Usage {
  return {
    prompt_tokens: done.promptTokens,
    completion_tokens: done.completionTokens,
    total_tokens: done.promptTokens + done.completionTokens,
    prompt_tokens_details: { cached_tokens: done.cachedTokens },
  };
}

/**
 * `system_fingerprint`, as a member to spread: the serving pool's, or none from an agent that sends
 * none (OpenAI's schema has it a string, never null). A stream's chunks before the last have none:
 * the serving pool is known once it is done.
 */
export const fingerprintOf = (done: Done | undefined): { system_fingerprint?: string } => (done?.fingerprint ? { system_fingerprint: done.fingerprint } : {});

/** A token as OpenAI gives it: its text and bytes (its raw bytes where the text is not them, a piece of a multi-byte character). */
const withBytes = (t: { token: string; logprob: number; raw?: Uint8Array }) => ({
  token: t.token,
  logprob: t.logprob,
  bytes: t.raw && t.raw.length > 0 ? [...t.raw] : [...Buffer.from(t.token, "utf8")],
});

/** `choices[].logprobs`: null when not asked for, else the tokens' entries in OpenAI's shape. */
export function logprobsBody(entries: TokenLogprob[] | undefined) {
  if (!entries) return null;
  return { content: entries.map((e) => ({ ...withBytes(e), top_logprobs: e.top_logprobs.map(withBytes) })), refusal: null };
}

/** A function call as OpenAI gives it. */
const toolCallBody = (c: ToolCall) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } });

/**
 * A `chat.completion`: one choice per text generated (`choices[i]`: its text, its function calls, and
 * when asked for its tokens' log probabilities). A reply of calls alone has null content, as OpenAI's.
 */
export function completionBody(id: string, created: number, model: string, choices: { text: string; logprobs?: TokenLogprob[] | undefined; toolCalls?: ToolCall[] }[], done: Done) {
  const message = (c: (typeof choices)[number]) => {
    const calls = c.toolCalls ?? [];
    if (calls.length === 0) return { role: "assistant", content: c.text, refusal: null };
    return { role: "assistant", content: c.text || null, refusal: null, tool_calls: calls.map(toolCallBody) };
  };
  return {
    id,
    object: "chat.completion",
    created,
    model,
    ...fingerprintOf(done),
    choices: choices.map((c, index) => ({ index, message: message(c), logprobs: logprobsBody(c.logprobs), finish_reason: done.finishReasons[index] ?? done.finishReason })),
    usage: usage(done),
  };
}

/** The identity every chunk of one streamed completion carries. */
export interface StreamIdentity {
  id: string;
  created: number;
  model: string;
  /** `stream_options.include_usage`: every chunk has `usage`, null but on the last. */
  includeUsage: boolean;
}

/**
 * A chunk with choice `index`'s delta (and, with `logprobs`, the entries of the tokens it completes);
 * `done` (on a finishing chunk) adds the choice's finish reason and the fingerprint.
 */
export function chunkBody(s: StreamIdentity, index: number, delta: { role?: "assistant"; content?: string; tool_calls?: unknown[] }, done?: Done, logprobs?: TokenLogprob[]) {
  return {
    id: s.id,
    object: "chat.completion.chunk",
    created: s.created,
    model: s.model,
    ...fingerprintOf(done),
    choices: [{ index, delta, logprobs: logprobsBody(logprobs), finish_reason: done ? (done.finishReasons[index] ?? done.finishReason) : null }],
    ...(s.includeUsage ? { usage: null } : {}),
  };
}

/**
 * The delta of function-call pieces, as OpenAI streams them: a call's first piece carries its id, type
 * and name; every piece a fragment of its arguments.
 */
export function toolCallsDelta(pieces: StreamedToolCall[]) {
  return {
    tool_calls: pieces.map((p) =>
      p.id !== undefined
        ? { index: p.index, id: p.id, type: "function", function: { name: p.name ?? "", arguments: p.arguments } }
        : { index: p.index, function: { arguments: p.arguments } },
    ),
  };
}

/** A piece of a function call on its way to the client: the call's place, and on its first piece its id and name. */
export interface StreamedToolCall {
  index: number;
  id?: string;
  name?: string;
  arguments: string;
}

/** The last chunk of `stream_options.include_usage`: no choices, the usage. */
export function usageChunkBody(s: StreamIdentity, done: Done) {
  return { id: s.id, object: "chat.completion.chunk", created: s.created, model: s.model, ...fingerprintOf(done), choices: [], usage: usage(done) };
}

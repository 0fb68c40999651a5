/**
 * What the scheduler takes from a node, bounded by what it can check itself (docs/security.md, "A
 * node's trust"): the size of each kind of message, what a Register may claim, and the usage a
 * node may report for a request (tokens, audio seconds), computed from the request alone.
 */
import { MAX_EMBEDDING_BYTES } from "../../core/chat.js";
import type { AgentMessage__Output } from "../../proto/index.js";
import type { CompletionRequest } from "./types.js";

const KiB = 1024;
const MiB = 1024 ** 2;

/**
 * The largest wire message of each kind the scheduler takes from a node, in bytes, with margin over
 * what an honest agent sends: a Register of a node with many pools and GPUs is a few KiB; a
 * heartbeat, a few dozen bytes per pool; one completion's text flushed at the longest
 * --stream-interval (1 s) with 20 log-probability alternatives per token, well under 1 MiB; a
 * transcript of a day of speech with word timestamps, some tens of MiB; an embeddings answer, at
 * most MAX_EMBEDDING_BYTES of vectors (core/chat.ts). A message past its kind's cap closes that
 * node's link (its requests move to other nodes or fail); nothing else is touched.
 */
export const MESSAGE_CAPS: Readonly<Record<NonNullable<AgentMessage__Output["body"]>, number>> = {
  register: 256 * KiB,
  heartbeat: 16 * KiB,
  chunk: 4 * MiB,
  chunks: 16 * MiB,
  done: 64 * KiB,
  error: 64 * KiB,
  draining: 1 * KiB,
  embeddings: MAX_EMBEDDING_BYTES + 1 * MiB,
  transcription_ack: 1 * KiB,
  transcription_segments: 1 * MiB,
  transcription_done: 48 * MiB,
  model_state: 64 * KiB,
};

/** The scheduler's gRPC receive limit: the largest kind's cap (grpc-js refuses a longer message and ends that call only). */
export const FLEET_RECEIVE_BYTES = Math.max(...Object.values(MESSAGE_CAPS));

/** The cap of a message's kind (a message with no body: the smallest). */
export function messageCap(body: AgentMessage__Output["body"]): number {
  return body ? MESSAGE_CAPS[body] : 1 * KiB;
}

/** Longest context a pool may claim per sequence (the agent's --context-size limit). */
export const MAX_CONTEXT_SIZE = 1_048_576;

/**
 * Prompt tokens a template may add beyond the prompt's own bytes: per message (its role's header
 * and end tokens), per function offered (its description's framing), and once per request (BOS,
 * the generation prompt, a function-calling preamble).
 */
export const PROMPT_OVERHEAD = { perMessage: 64, perTool: 64, perRequest: 1024 } as const;
/** Tokens an embedding input may hold beyond its bytes (BOS, EOS, a separator). */
const EMBEDDING_INPUT_OVERHEAD = 16;

const utf8 = (s: string | undefined): number => (s ? Buffer.byteLength(s, "utf8") : 0);

/**
 * The most prompt tokens a request can be: every tokenizer Kiln serves (byte-level BPE and
 * SentencePiece with byte fallback) spends at least one byte of text per token, so a prompt has at
 * most as many tokens as its UTF-8 bytes, plus what the chat template adds (PROMPT_OVERHEAD). The
 * bytes counted are those the template renders: each message's content, its calls' names and
 * arguments and the id it answers; the functions offered, as JSON; the raw prompt; an embedding's inputs.
 */
export function promptTokenBound(request: CompletionRequest): number {
  if (request.embed) return request.embed.inputs.reduce((n, input) => n + utf8(input) + EMBEDDING_INPUT_OVERHEAD, 0);
  let bytes = utf8(request.prompt);
  for (const m of request.messages) {
    bytes += utf8(m.content) + utf8(m.toolCallId) + PROMPT_OVERHEAD.perMessage;
    for (const call of m.toolCalls ?? []) bytes += utf8(call.id) + utf8(call.name) + utf8(call.arguments);
  }
  for (const tool of request.tools ?? []) bytes += utf8(JSON.stringify(tool)) + PROMPT_OVERHEAD.perTool;
  if (request.responseFormat) bytes += utf8(JSON.stringify(request.responseFormat));
  return bytes + PROMPT_OVERHEAD.perRequest;
}

/**
 * The most completion tokens a request can be: `max_tokens` per choice (without one, the pool's
 * context, the most a sequence can hold; MAX_CONTEXT_SIZE when it names none), times its choices.
 * Embeddings generate none.
 */
export function completionTokenBound(request: CompletionRequest, contextSize: number): number {
  if (request.embed) return 0;
  const perChoice = request.maxTokens ?? (contextSize > 0 ? Math.min(contextSize, MAX_CONTEXT_SIZE) : MAX_CONTEXT_SIZE);
  return perChoice * (request.n ?? 1);
}

/**
 * Bytes of text one token may bring, as far as the scheduler takes it from a node: far above any
 * real token's (a few bytes; the longest pieces of common vocabularies, some tens).
 */
export const MAX_BYTES_PER_TOKEN = 64;

/**
 * The most a node may send for one completion, all its messages together (docs/security.md, "A
 * node's trust"): bytes of text, calls' names and arguments and (when asked for) log-probability
 * tokens, at MAX_BYTES_PER_TOKEN per token of `completionTokenBound` and per alternative asked
 * for; log-probability entries (a token's and each of its alternatives), one per token and per
 * alternative. Past either, the request fails and the node is counted.
 */
export function completionReceiveBound(request: CompletionRequest, contextSize: number): { bytes: number; logprobs: number } {
  const tokens = completionTokenBound(request, contextSize);
  const perToken = 1 + (request.logprobs ?? 0);
  return { bytes: tokens * perToken * MAX_BYTES_PER_TOKEN, logprobs: request.logprobs !== undefined ? tokens * perToken : 0 };
}

/** The roles of a chat message (README, "API"), shared by the scheduler's validation and the agent's engine. */
export const CHAT_ROLES = ["system", "user", "assistant"] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

export function isChatRole(value: string): value is ChatRole {
  return (CHAT_ROLES as readonly string[]).includes(value);
}

/**
 * Sampling beyond the temperature, as a chat completion asks for it (OpenAI's fields and
 * llama.cpp's extensions), validated by the scheduler and applied by the agent's engine.
 * An absent field keeps the engine's default.
 */
export interface Sampling {
  /** Nucleus sampling: the smallest set of tokens whose probabilities add up to this (0–1). */
  topP?: number;
  /** Only the k most likely tokens (llama.cpp's `top_k`; 0: all). */
  topK?: number;
  /** Tokens below this fraction of the most likely one's probability are dropped (llama.cpp's `min_p`, 0–1). */
  minP?: number;
  /** The same seed, request and model give the same reply. */
  seed?: number;
  /** Subtracted from the logit of every token already generated (−2 to 2). */
  presencePenalty?: number;
  /** Subtracted from a token's logit once per time it was generated (−2 to 2). */
  frequencyPenalty?: number;
  /** llama.cpp's `repeat_penalty`: the logits of tokens already generated are divided by it (1: off). */
  repeatPenalty?: number;
  /** Token id (as a decimal string) → bias added to its logit; −100 bans the token. */
  logitBias?: Record<string, number>;
  /** Texts that end the reply where they first appear; never part of it (at most 4). */
  stop?: string[];
}

/**
 * Output held to JSON by a grammar (OpenAI's `response_format`): any JSON object, or JSON valid for
 * `schema` (core/json-schema.ts: the subset a grammar can enforce). Absent: free text.
 */
export type ResponseFormat = { type: "json_object" } | { type: "json_schema"; schema: Record<string, unknown> };

/**
 * What an agent's pool can do beyond plain chat, advertised in its registration: the scheduler sends
 * a request only to a pool with every capability it needs, so an older agent never silently drops a
 * field it does not know. An agent that advertises none is plain chat (max_tokens, temperature).
 */
export const CAPABILITIES = {
  /** Sampling beyond the temperature, stop texts included (`Sampling`). */
  sampling: "sampling",
  /** Output held to JSON (`ResponseFormat`). */
  responseFormat: "response_format",
  /** Log probabilities of the generated tokens (`logprobs`, `top_logprobs`). */
  logprobs: "logprobs",
  /** A raw prompt continued without the chat template (`POST /v1/completions`). */
  completions: "completions",
  /** Embeddings of texts from the model's embedding context (`POST /v1/embeddings`). */
  embeddings: "embeddings",
  /** Several choices of one prompt (`n` > 1), sharing its KV cache. */
  choices: "n",
} as const;
export type Capability = (typeof CAPABILITIES)[keyof typeof CAPABILITIES];

/** Every capability this version's agent has. */
export const AGENT_CAPABILITIES: readonly Capability[] = Object.values(CAPABILITIES);

/** The capabilities a request needs. */
export function requiredCapabilities(request: { sampling?: Sampling; responseFormat?: ResponseFormat; logprobs?: number; prompt?: string; embed?: unknown; n?: number }): Capability[] {
  const needs: Capability[] = [];
  if ((request.n ?? 1) > 1) needs.push(CAPABILITIES.choices);
  if (request.embed !== undefined) needs.push(CAPABILITIES.embeddings);
  if (request.prompt !== undefined) needs.push(CAPABILITIES.completions);
  if (request.sampling && Object.keys(request.sampling).length > 0) needs.push(CAPABILITIES.sampling);
  if (request.responseFormat) needs.push(CAPABILITIES.responseFormat);
  if (request.logprobs !== undefined) needs.push(CAPABILITIES.logprobs);
  return needs;
}

/** Most alternatives `top_logprobs` may ask for per token (OpenAI's limit). */
export const MAX_TOP_LOGPROBS = 20;

/** Most choices one request may ask for (`n`); never more than the slots of a pool serving the model. */
export const MAX_CHOICES = 16;

/**
 * Largest gRPC message either side of the fleet link takes (grpc-js's default, 4 MiB, was below a
 * --max-body prompt and below a batch of large embeddings: the link broke and every request on it failed).
 */
export const FLEET_MESSAGE_BYTES = 128 * 1024 * 1024;
/** Most bytes of embedding vectors one request may ask for (inputs × dimensions × 4), kept well inside a fleet message. */
export const MAX_EMBEDDING_BYTES = 64 * 1024 * 1024;
/**
 * Most tokens one embeddings request may hold, all inputs together (OpenAI's limit is 300,000): a pool
 * embeds one request at a time, so this bounds how long one tenant's batch keeps another's waiting.
 */
export const MAX_EMBEDDING_TOKENS = 300_000;

/**
 * Most log-probability entries (tokens × (1 + alternatives), all choices) a non-streamed answer may
 * gather: the scheduler holds them all until the JSON body is made. Streamed answers send them as they come.
 */
export const MAX_LOGPROB_ENTRIES = 100_000;

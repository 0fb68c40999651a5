/** The roles of a chat message (README, "API"; `tool`: a function's result), shared by the scheduler's validation and the agent's engine. */
export const CHAT_ROLES = ["system", "user", "assistant", "tool"] as const;
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

/** A function the model may call (OpenAI's `tools[].function`). */
export interface ToolFunction {
  /** 1–64 letters, digits, `_` or `-`; unique among a request's tools. */
  name: string;
  description?: string;
  /** JSON Schema of its arguments (the subset core/json-schema.ts enforces); absent: it takes none (`{}`). */
  parameters?: Record<string, unknown>;
}

/**
 * Whether the model calls a function: "auto" (its choice), "none" (it answers in text, not shown the
 * tools), "required" (one call at least), or the one named (shown that function only).
 */
export type ToolChoice = "auto" | "none" | "required" | { name: string };

/** A call the model made, as a conversation carries it back: its id, the function, the arguments as JSON text. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** A piece of a call as it is generated: the call's place in the reply, its function on its first piece, a fragment of its arguments' JSON text. */
export interface ToolCallDelta {
  index: number;
  name?: string;
  arguments: string;
}

/** A message of a conversation as the fleet carries it (roles CHAT_ROLES). */
export interface ChatMessage {
  role: ChatRole;
  content: string;
  /** An assistant message's function calls (answered by the `tool` messages after it). */
  toolCalls?: ToolCall[];
  /** A `tool` message: the call it answers. */
  toolCallId?: string;
}

/** Where a conversation breaks the rule of function calls: the message's index, the field, and why. */
export interface ToolOrderProblem {
  index: number;
  field: string;
  message: string;
}

/**
 * OpenAI's rule for function calls in a conversation: the `tool` messages right after an assistant
 * message with `tool_calls` answer each of its calls once, by id, and nothing else answers or
 * interrupts them. Returns the first break of it, or undefined.
 */
export function checkToolOrder(messages: readonly ChatMessage[]): ToolOrderProblem | undefined {
  let open: Map<string, boolean> | undefined; // the last assistant message's call ids → answered
  let opener = -1;
  const unanswered = (): ToolOrderProblem | undefined => {
    const id = open && [...open].find(([, answered]) => !answered)?.[0];
    return id === undefined
      ? undefined
      : { index: opener, field: "tool_calls", message: `the call ${JSON.stringify(id)} has no tool message answering it (each call is answered by a tool message right after it)` };
  };
  for (const [index, m] of messages.entries()) {
    if (m.role === "tool") {
      const id = m.toolCallId ?? "";
      if (!open?.has(id)) return { index, field: "tool_call_id", message: `${JSON.stringify(id)} is not a call of the assistant message before it` };
      if (open.get(id)) return { index, field: "tool_call_id", message: `the call ${JSON.stringify(id)} is answered twice` };
      open.set(id, true);
      continue;
    }
    const problem = unanswered();
    if (problem) return problem;
    open = undefined;
    if (m.toolCalls?.length) {
      if (m.role !== "assistant") return { index, field: "tool_calls", message: "only assistant messages have tool calls" };
      open = new Map();
      opener = index;
      for (const call of m.toolCalls) {
        if (open.has(call.id)) return { index, field: "tool_calls", message: `the id ${JSON.stringify(call.id)} is used by two calls` };
        open.set(call.id, false);
      }
    }
  }
  return unanswered();
}

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
  /** Function calling: `tools` offered to the model, and conversations with calls and their results. */
  tools: "tools",
  /** The stop text that ended a turn named in its `done` (`stop_text`): Anthropic's `stop_sequence`. */
  stopText: "stop_text",
} as const;
export type Capability = (typeof CAPABILITIES)[keyof typeof CAPABILITIES];

/** Every capability this version's agent has. */
export const AGENT_CAPABILITIES: readonly Capability[] = Object.values(CAPABILITIES);

/** The capabilities a request needs. */
export function requiredCapabilities(request: {
  sampling?: Sampling;
  responseFormat?: ResponseFormat;
  logprobs?: number;
  prompt?: string;
  embed?: unknown;
  n?: number;
  tools?: readonly unknown[];
  messages?: readonly ChatMessage[];
  nameStop?: boolean;
}): Capability[] {
  const needs: Capability[] = [];
  if (request.nameStop) needs.push(CAPABILITIES.stopText);
  if ((request.tools?.length ?? 0) > 0 || request.messages?.some((m) => m.role === "tool" || (m.toolCalls?.length ?? 0) > 0)) needs.push(CAPABILITIES.tools);
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

/**
 * The share of a slot's cached prompt a request must share with it to be given that slot while
 * others are free (llama-server's `--slot-prompt-similarity`, 0.5): a conversation whose cache holds
 * mostly its own turns is not cut back to a system prompt it shares with a newcomer. The agent's slots
 * (agent/llm/pool.ts, in tokens) and the scheduler's record of them (scheduler/fleet/prefixes.ts, in
 * messages) follow the same rule.
 */
export const SLOT_PROMPT_SIMILARITY = 0.5;

import type { ChatMessage, ResponseFormat, Sampling, ToolCallDelta, ToolChoice, ToolFunction } from "../../core/chat.js";
import type { Hardware__Output, SchedulerMessage } from "../../proto/index.js";

export type { ChatMessage };

/** A validated completion to run somewhere in the fleet: a conversation, or a raw prompt. */
export interface CompletionRequest {
  model: string;
  /** The conversation, rendered through the model's chat template (empty with `prompt`). */
  messages: ChatMessage[];
  /** A prompt continued as it is, without the chat template (`POST /v1/completions`). */
  prompt?: string;
  /** Not a completion: embeddings of these texts (`POST /v1/embeddings`); `dimensions`: the size the client expects. */
  embed?: { inputs: string[]; dimensions?: number };
  maxTokens?: number;
  temperature?: number;
  sampling?: Sampling;
  /** Output held to JSON (`response_format`); absent: free text. */
  responseFormat?: ResponseFormat;
  /** Log probabilities of the generated tokens, with this many alternatives each (`top_logprobs`); absent: none. */
  logprobs?: number;
  /** Functions the model may call (absent with `tool_choice` "none": the model is not shown them). */
  tools?: ToolFunction[];
  /** With `tools`: whether and which function the model calls. Default "auto". */
  toolChoice?: ToolChoice;
  /** With `tools`: whether one reply may hold several calls. Default true. */
  parallelToolCalls?: boolean;
  /** Choices to generate (`n`; default 1): the request holds this many slots of one pool. */
  n?: number;
  /**
   * The answer names the stop text (`sampling.stop`) that ended it (Anthropic's `stop_sequence`):
   * only agents that report it (`stop_text`) serve the request. Not sent to agents.
   */
  nameStop?: boolean;
  /**
   * The account the request is for: waiting requests are queued per account and the queues served
   * round-robin, so one account's flood cannot starve another. Requests without one share a queue.
   * Never sent to agents.
   */
  account?: string;
  /**
   * Told, once, what the request used: with its `done` (or embeddings), or with the agent's answer to
   * a cancel (the tokens generated before the client went away). Never for a request that failed. Not sent to agents.
   */
  onUsage?: (used: { promptTokens: number; completionTokens: number }) => void;
}

/** A generated token's log probability and its alternatives, as the agent reports it. */
export interface TokenLogprob {
  token: string;
  logprob: number;
  /** Raw bytes when the text is not them (a piece of a multi-byte character); empty otherwise. */
  raw?: Uint8Array;
  top_logprobs: { token: string; logprob: number; raw?: Uint8Array }[];
  /** Where the token's text starts in its choice's text (tokens completing one character share it). */
  text_offset: number;
}

export type CompletionEvent =
  | {
      type: "text";
      text: string;
      /** With `logprobs`: those of the tokens this text completes. */ logprobs?: TokenLogprob[];
      /** The choice (0 unless `n` > 1). */ index: number;
      /** Pieces of function calls generated after the text (a call's first piece names its function). */ toolCalls?: ToolCallDelta[];
    }
  | { type: "embeddings"; /** One per input, in order. */ vectors: number[][]; promptTokens: number }
  | {
      type: "done";
      finishReason: string;
      promptTokens: number;
      completionTokens: number;
      /** Each choice's finish reason, by index (one entry unless `n` > 1). */
      finishReasons: string[];
      /** Prompt tokens the agent's slot already held in its KV cache. */
      cachedTokens: number;
      /** The serving pool's `system_fingerprint` ("" from an agent that sends none). */
      fingerprint: string;
      /** The request's stop text (`sampling.stop`) that ended the first choice, when the node says one did (only one of the request's). */
      stopText?: string;
    };

/** What the fleet needs from one connected agent's stream (the gRPC server implements it). */
export interface AgentLink {
  /**
   * Which credential opened this link (the gRPC server uses its node token's digest, never the
   * token). Only a link with the same one may replace it under the same node id.
   */
  readonly credential?: string;
  /** Queues `message` on the stream; false when the stream's buffer is full (see `drained`). */
  send(message: SchedulerMessage): boolean | void;
  /** Resolves once the stream's buffer has room again (or `signal` aborts, or the stream ends). */
  drained?(signal?: AbortSignal): Promise<void>;
  /** Ends the stream from the scheduler's side (agent replaced or silent too long). */
  close(reason: string): void;
  /** Whether the link's node token lets its node offer `model` (a replica placed on it). Default: any. */
  offers?(model: string): boolean;
  /** Most slots its node token allows the node, all pools together. Default: no bound here (Register's was checked). */
  readonly maxSlots?: number;
}

export interface PoolState {
  modelIds: ReadonlySet<string>;
  slots: number;
  contextSize: number;
  /** The replies' `system_fingerprint` (the agent's digest of the model file and its build). */
  fingerprint: string;
  /** What the pool does beyond plain chat (core/chat.ts CAPABILITIES). */
  capabilities: ReadonlySet<string>;
  /** Requests dispatched to this pool and not yet answered with done/error. */
  inflight: number;
  /** Slots the agent's own work holds (transcript translation), from its latest heartbeat. */
  local: number;
}

/** A snapshot of one agent, for `/v1/models` and observability. */
export interface AgentSnapshot {
  nodeId: string;
  hardware: Hardware__Output | null;
  pools: { modelIds: string[]; slots: number; inflight: number; local: number; contextSize: number; peakInflight: number; capabilities: string[] }[];
  draining: boolean;
  connectedAt: number;
  /** Set when the node was drained for reporting past the scheduler's bounds: why, and since when (Unix ms). */
  distrusted?: { reason: string; at: number };
  /** What the scheduler observed of it over the recent window (speed.ts): mean TTFT (ms) and tokens/s (undefined: none yet), requests it runs. */
  observed: { ttftMs: number | undefined; tokensPerSecond: number | undefined; inflight: number };
  /** Whether it takes replicas the scheduler places (an agent without --serve); false for one serving its --serve list. */
  placeable: boolean;
  /** The devices a placeable node offers (none otherwise), each one's free memory as placement counts it (replicas/NodeReplicas.accounted). */
  devices: { name: string; totalBytes: number; freeBytes: number }[];
  /** The replicas placed on it (a placeable node), in the order they came. */
  replicas: ReplicaSnapshot[];
}

/** One replica on a placeable node, for the dashboard's fleet page. */
export interface ReplicaSnapshot {
  model: string;
  state: "loading" | "ready" | "unloading";
  /** 0–1 while loading (the download, then the load); 1 once ready. */
  progress: number;
  /** Bytes it holds on each of the node's devices, by device index (as its load order planned). */
  bytes: number[];
  /** Requests its pool answers now, and the pool's slots (0 and 0 until it is ready). */
  inflight: number;
  slots: number;
  /** When it last took a request (Unix ms; its load's time until the first). */
  lastUsedAt: number;
  /** Pinned by the operator on this scheduler: placement never unloads it. */
  pinned: boolean;
}

/**
 * The codes an agent's error message carries to the scheduler over the fleet link (the proto's
 * `error.code`), named once for both sides. Engine codes (`context_length_exceeded`, …) are the
 * agent's `LlmEngineError` codes; these lists say which of them the client caused, drawn from the
 * registry (core/error-codes.ts: its `engine`, `client` and `retryable` columns).
 */
import { codesWhere, type ErrorCode } from "./error-codes.js";

/** The codes of the link itself. */
export const WIRE = {
  /** The node is draining: the request may go to another node. */
  draining: "draining",
  /** Another scheduler's work took the slot a moment before (an agent of several schedulers): queue it or send it elsewhere. */
  nodeBusy: "node_busy",
  /** The node takes no transcriptions. */
  transcriptionUnavailable: "transcription_unavailable",
  /** The request was cancelled (its client went away, or the link went down). */
  cancelled: "cancelled",
  /** The node ended a request without its answer, or answered what the scheduler cannot read. */
  agentError: "agent_error",
  /** The node generating an answer went away after some of it had been sent. */
  agentLost: "agent_lost",
} as const satisfies Record<string, ErrorCode>;

/** Chat engine codes that are the client's fault: a 400 naming the field, when no text was sent yet. */
export const CHAT_CLIENT_FAULTS: ReadonlySet<string> = codesWhere((c) => c.client && (c.engine?.includes("chat") ?? false));

/** Transcription codes that are the client's fault (its file or its form): a 400. */
export const AUDIO_CLIENT_FAULTS: ReadonlySet<string> = codesWhere((c) => c.client && (c.engine?.includes("audio") ?? false));

/** Transcription refusals before any of it ran, which another node may take: the agent marks them retryable. */
export const AUDIO_RETRYABLE: ReadonlySet<string> = codesWhere((c) => c.retryable && (c.engine?.includes("audio") ?? false));

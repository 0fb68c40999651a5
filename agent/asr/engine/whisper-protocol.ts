/** Messages between the agent (WhisperEngine) and a whisper engine process (whisper-child.ts). */
import type { WhisperModelName } from "../../../models/whisper.js";
import type { PrebuiltKind } from "../../prebuilt.js";

/** One token of whisper's detailed output; times in milliseconds on the decoded audio. */
export interface WhisperToken {
  text: string;
  id: number;
  p: number;
  from?: number;
  to?: number;
}

/** One segment of whisper's detailed output; times in milliseconds on the decoded audio. */
export interface WhisperSegment {
  from: number;
  to: number;
  text: string;
  lang: string;
  confidence: number;
  tokens: WhisperToken[];
}

export interface DecodeParams {
  /** A whisper language code, or undefined to detect. */
  language?: string;
  /** Whisper's translate task (into English). */
  translate: boolean;
}

/** How an engine process loads and runs models (see WhisperPoolOptions). */
export interface WhisperEngineConfig {
  /** The prebuilt folder whose whisper addon to load (engine/backend.ts). */
  backend: PrebuiltKind;
  /** Models on the GPU. */
  gpu: boolean;
  memoryBudgetMb: number;
  parallel: number;
  threads: number;
  temperatureFallback: boolean;
}

/** From the agent: the configuration (first), then decodes, answered by `id`. */
export type ToEngine =
  | { kind: "configure"; config: WhisperEngineConfig }
  | { kind: "decode"; id: number; model: WhisperModelName; file: string; pcm: Float32Array; params: DecodeParams };

/**
 * From the engine: `ready` once it listens; per decode `started` (the model is loaded and whisper
 * runs), `segment`s, then `done` or `error`; `models` when the loaded set changes; `log` lines.
 */
export type FromEngine =
  | { kind: "ready" }
  | { kind: "started"; id: number }
  | { kind: "segment"; id: number; segment: WhisperSegment }
  | { kind: "done"; id: number; segments: WhisperSegment[] }
  | { kind: "error"; id: number; message: string }
  | { kind: "models"; loaded: WhisperModelName[] }
  | { kind: "log"; level: "info" | "warn"; fields: Record<string, unknown>; message: string };

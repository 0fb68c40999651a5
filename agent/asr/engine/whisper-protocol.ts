/** Messages between the agent (WhisperEngine) and a whisper engine process (whisper-child.ts). */
import type { WhisperModelName } from "../../../models/whisper.js";
import type { PrebuiltKind } from "../../../core/prebuilt.js";
import type { DecodingOptions } from "../../../speech/options.js";

export type { DecodingOptions };

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
  /** When whisper detected the language: its probability (0–1); absent when the request named it. */
  langProb?: number;
  confidence: number;
  tokens: WhisperToken[];
}

export interface DecodeParams {
  /** A whisper language code, or undefined to detect. */
  language?: string;
  /** Whisper's translate task (into English). */
  translate: boolean;
  /** Decoding choices a request may make; absent: the engine's (whisper.cpp's) defaults. */
  decoding?: DecodingOptions;
}

/** How whisper decodes, as a request may choose it (docs/api.md, "Transcription"). */

/**
 * The addon's parameters for one decode: Kiln's fixed ones, what the request chose, and last what the
 * pool turned off (`temperatureFallback: false`, which the benchmarks set, wins over a request's step).
 */
export function engineParams(settings: Pick<WhisperEngineConfig, "threads" | "temperatureFallback">, params: DecodeParams): Record<string, number | string | boolean> {
  return {
    threads: settings.threads,
    translate: params.translate,
    language: params.language ?? "auto",
    tokenTimestamps: true,
    suppressNonSpeech: true,
    noContext: true,
    ...nativeDecoding(params.decoding),
    ...(settings.temperatureFallback ? {} : { temperatureInc: 0 }),
  };
}

/** The addon's decoding parameters for `decoding` (absent fields: its defaults). */
export function nativeDecoding(decoding: DecodingOptions = {}): Record<string, number | string> {
  const out: Record<string, number | string> = {};
  if (decoding.prompt) out.prompt = decoding.prompt;
  if (decoding.temperature !== undefined) out.temperature = decoding.temperature;
  if (decoding.temperatureIncrement !== undefined) out.temperatureInc = decoding.temperatureIncrement;
  if (decoding.entropyThreshold !== undefined) out.entropyThreshold = decoding.entropyThreshold;
  if (decoding.logprobThreshold !== undefined) out.logprobThreshold = decoding.logprobThreshold;
  if (decoding.noSpeechThreshold !== undefined) out.noSpeechThreshold = decoding.noSpeechThreshold;
  return out;
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
  { kind: "configure"; config: WhisperEngineConfig } | { kind: "decode"; id: number; model: WhisperModelName; file: string; pcm: Float32Array; params: DecodeParams };

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

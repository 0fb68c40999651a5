/**
 * The slice of sherpa-onnx-node Kiln uses, typed by hand (the package ships no `.d.ts`).
 * Loading it is lazy: the addon is only required where voice activity or diarization runs.
 */
import { createRequire } from "node:module";

export interface SpeechSegment {
  /** First sample of the segment in the accepted stream. */
  start: number;
  samples: Float32Array;
}

export interface VadConfig {
  sileroVad: {
    model: string;
    /** Speech probability above which a window is speech. */
    threshold: number;
    /** Seconds of silence that end a segment. */
    minSilenceDuration: number;
    /** Shortest segment kept, in seconds. */
    minSpeechDuration: number;
    /** Samples per window: 512 for Silero v5 at 16 kHz. */
    windowSize: number;
    /** Longer speech is cut here, in seconds. */
    maxSpeechDuration: number;
  };
  sampleRate: number;
  numThreads?: number;
  debug?: boolean;
  provider?: string;
}

export interface Vad {
  acceptWaveform(samples: Float32Array): void;
  isEmpty(): boolean;
  front(enableExternalBuffer?: boolean): SpeechSegment;
  pop(): void;
  flush(): void;
}

export interface DiarizationConfig {
  segmentation: { pyannote: { model: string }; numThreads?: number; debug?: boolean };
  embedding: { model: string; numThreads?: number; debug?: boolean };
  /** `numClusters` > 0 fixes the speaker count; otherwise clusters merge below `threshold`. */
  clustering: { numClusters: number; threshold: number };
  /** Shortest speech kept, and shortest gap that separates turns of one speaker, in seconds. */
  minDurationOn: number;
  minDurationOff: number;
}

/** A speaker turn: seconds, and a cluster index (0-based, arbitrary order). */
export interface DiarizationSegment {
  start: number;
  end: number;
  speaker: number;
}

export interface OfflineSpeakerDiarization {
  readonly sampleRate: number;
  process(samples: Float32Array): DiarizationSegment[];
  setConfig(config: { clustering: DiarizationConfig["clustering"] }): void;
}

export interface SherpaOnnx {
  Vad: new (config: VadConfig, bufferSizeInSeconds: number) => Vad;
  OfflineSpeakerDiarization: new (config: DiarizationConfig) => OfflineSpeakerDiarization;
}

let sherpa: SherpaOnnx | undefined;
export function loadSherpa(): SherpaOnnx {
  sherpa ??= createRequire(import.meta.url)("sherpa-onnx-node") as SherpaOnnx;
  return sherpa;
}

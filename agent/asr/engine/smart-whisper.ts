/**
 * The slice of smart-whisper Kiln uses, typed by hand. Loading it is lazy: the addon is only
 * required in the whisper engine process (engine/whisper-child.ts), never in the agent's.
 */
import { createRequire } from "node:module";
import type { WhisperSegment } from "./whisper-protocol.js";

export interface NativeModel {
  readonly freed: boolean;
  free(): Promise<void>;
}

export interface NativeTask {
  on(event: "transcribed", listener: (segment: WhisperSegment) => void): void;
  readonly result: Promise<WhisperSegment[] | Error>;
}

export interface SmartWhisper {
  WhisperModel: { load(file: string, gpu?: boolean): Promise<NativeModel> };
  TranscribeTask: { run(model: NativeModel, pcm: Float32Array, params: Record<string, unknown>): Promise<NativeTask> };
}

let native: SmartWhisper | undefined;
export function smartWhisper(): SmartWhisper {
  native ??= createRequire(import.meta.url)("smart-whisper") as SmartWhisper;
  return native;
}

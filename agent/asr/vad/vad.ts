/**
 * Voice-activity detection: Silero VAD through sherpa-onnx, in a child process (engine/task.ts)
 * so the synchronous detector never blocks the event loop and a native crash fails only this
 * task. The model's signature is checked first, because sherpa-onnx ends its process on a model
 * it does not expect.
 */
import { readFile } from "node:fs/promises";
import { readOnnxSignature } from "../../../core/onnx.js";
import { EngineError } from "../errors.js";
import { runTask } from "../engine/task.js";
import type { SpeechSpan, VadRequest } from "./protocol.js";

export type { SpeechSpan } from "./protocol.js";

export interface VadOptions {
  /** Silero VAD ONNX file (v4 or v5). */
  model: string;
  /** Speech probability threshold. Default 0.5. */
  threshold?: number;
  /** Silence that ends a span, in seconds. Default 0.5. */
  minSilenceSeconds?: number;
  /** Shorter speech is dropped, in seconds. Default 0.25. */
  minSpeechSeconds?: number;
  /** Longer speech is cut, in seconds. Default 30 (whisper's window). */
  maxSpeechSeconds?: number;
}

const checked = new Map<string, Promise<void>>();

/** Refuses anything that is not a Silero VAD v4/v5 graph, before sherpa-onnx sees it. */
export function checkVadModel(path: string): Promise<void> {
  let pending = checked.get(path);
  if (!pending) {
    pending = (async () => {
      const bytes = await readFile(path).catch((err: NodeJS.ErrnoException) => {
        throw new EngineError(`voice-activity model ${path} cannot be read (${err.code ?? err.message}); set --vad-model`);
      });
      let io: string;
      try {
        const sig = readOnnxSignature(bytes);
        io = `${sig.inputs.join(",")}->${sig.outputs.join(",")}`;
      } catch {
        throw new EngineError(`voice-activity model ${path} is not an ONNX file`);
      }
      if (io !== "input,state,sr->output,stateN" && io !== "input,sr,h,c->output,hn,cn") {
        throw new EngineError(`voice-activity model ${path} is not a Silero VAD (graph ${io})`);
      }
    })();
    pending.catch(() => checked.delete(path));
    checked.set(path, pending);
  }
  return pending;
}

/**
 * Finds the speech in a 16 kHz f32le PCM file. `onProgress` gets the fraction scanned.
 * Rejects with `JobAbortedError` when `signal` aborts (the child process is killed), and with an
 * `EngineError` when the detector fails or its process dies.
 */
export async function detectSpeech(pcmPath: string, options: VadOptions, onProgress?: (fraction: number) => void, signal?: AbortSignal): Promise<SpeechSpan[]> {
  await checkVadModel(options.model);
  const request: VadRequest = {
    pcmPath,
    model: options.model,
    threshold: options.threshold ?? 0.5,
    minSilenceSeconds: options.minSilenceSeconds ?? 0.5,
    minSpeechSeconds: options.minSpeechSeconds ?? 0.25,
    maxSpeechSeconds: options.maxSpeechSeconds ?? 30,
  };
  return runTask<VadRequest, SpeechSpan[]>("vad/worker.js", "voice-activity detection", request, onProgress, signal);
}

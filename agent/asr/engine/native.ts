/**
 * Kiln's whisper addon (`native/whisper/addon.cc`), typed. `build-whisper` installs one build per
 * prebuilt folder of node-llama-cpp (CPU, CUDA, Vulkan), linked to that folder's ggml; a process
 * loads exactly one of them (they share library names), and only a whisper engine process
 * (engine/whisper-child.ts) or the backend probe (engine/probe-child.ts) does, never the agent.
 */
import { createRequire } from "node:module";
import { installedWhisperAddon, type PrebuiltKind } from "../../../core/prebuilt.js";
import { EngineError } from "../errors.js";
import type { WhisperSegment } from "./whisper-protocol.js";

/** A ggml device the addon's backends found. */
export interface BackendDevice {
  name: string;
  description: string;
  type: "cpu" | "gpu" | "igpu" | "accel";
}

/** A loaded whisper model (a whisper.cpp context); decodes share it, each on a state of its own. */
export interface NativeModel {
  readonly freed: boolean;
  /** Frees the context; refused while a decode uses it. */
  free(): Promise<void>;
}

/** The decoding options the addon reads; every other whisper.cpp setting keeps its greedy default. */
export interface NativeParams {
  threads?: number;
  /** A language code, or "auto" (default) to detect. */
  language?: string;
  translate?: boolean;
  noContext?: boolean;
  tokenTimestamps?: boolean;
  suppressNonSpeech?: boolean;
  temperature?: number;
  /** Step of whisper's temperature fallback; 0 turns the fallback off. */
  temperatureInc?: number;
  entropyThreshold?: number;
  logprobThreshold?: number;
  noSpeechThreshold?: number;
  /** Whisper's initial prompt. */
  prompt?: string;
}

export interface WhisperAddon {
  /** whisper.cpp's version. */
  version: string;
  /** Registers the ggml backend modules in `dir`; returns every device then known. */
  loadBackends(dir: string): BackendDevice[];
  loadModel(file: string, options: { gpu: boolean; flashAttn?: boolean; device?: number }): Promise<NativeModel>;
  /** Decodes 16 kHz mono `pcm`; `onSegment` sees each segment as whisper finishes it. */
  transcribe(model: NativeModel, pcm: Float32Array, params: NativeParams, onSegment?: (segment: WhisperSegment) => void): Promise<WhisperSegment[]>;
}

let loaded: { kind: PrebuiltKind; addon: WhisperAddon; devices: BackendDevice[] } | undefined;

/**
 * Loads the addon built for prebuilt folder `kind` and registers that folder's ggml backends.
 * Once per process: a second call with another kind is refused.
 */
export function loadWhisperAddon(kind: PrebuiltKind): { addon: WhisperAddon; devices: BackendDevice[] } {
  if (loaded) {
    if (loaded.kind !== kind) throw new EngineError(`this process already loaded the ${loaded.kind} whisper addon`);
    return loaded;
  }
  const installed = installedWhisperAddon(kind);
  if (!installed) throw new EngineError(`Kiln's whisper addon is not built for node-llama-cpp's ${kind} binaries; run npm run build:whisper`);
  const addon = createRequire(import.meta.url)(installed.file) as WhisperAddon;
  loaded = { kind, addon, devices: addon.loadBackends(installed.dir) };
  return loaded;
}

/**
 * Whisper models through smart-whisper: which catalog models are installed (`ggml-<name>.bin`
 * in the whisper directory), loading on first use, keeping them loaded, unloading the least
 * recently used idle one when a memory budget would be exceeded, and decoding on parallel
 * whisper states of one loaded model (smart-whisper makes a fresh state per call).
 */
import { createRequire } from "node:module";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../core/log.js";
import { WHISPER_MODELS, whisperModel, type WhisperModelName } from "../../models/whisper.js";
import { EngineError } from "./errors.js";
import { Semaphore } from "../../core/semaphore.js";

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

interface NativeModel {
  readonly freed: boolean;
  free(): Promise<void>;
}
interface NativeTask {
  on(event: "transcribed", listener: (segment: WhisperSegment) => void): void;
  readonly result: Promise<WhisperSegment[] | Error>;
}
interface SmartWhisper {
  WhisperModel: { load(file: string, gpu?: boolean): Promise<NativeModel> };
  TranscribeTask: { run(model: NativeModel, pcm: Float32Array, params: Record<string, unknown>): Promise<NativeTask> };
}

let native: SmartWhisper | undefined;
function smartWhisper(): SmartWhisper {
  native ??= createRequire(import.meta.url)("smart-whisper") as SmartWhisper;
  return native;
}

export interface WhisperPoolOptions {
  /** Folder holding `ggml-<name>.bin` files. */
  dir: string;
  /** Ask whisper.cpp for the GPU (used when the library was built with CUDA). */
  gpu: boolean;
  /** Loaded models may take this many MiB together before idle ones are unloaded. */
  memoryBudgetMb: number;
  /** Whisper decodes running at once (each on its own state). */
  parallel: number;
  /** Compute threads per decode. */
  threads: number;
  /**
   * Whisper's temperature fallback: re-decode a window at rising temperatures when the text looks
   * degenerate (compression ratio, log-probability). Default true; benchmarks turn it off on both
   * sides, since random-weight models trip it on every window.
   */
  temperatureFallback?: boolean;
  logger: Logger;
}

export interface DecodeParams {
  /** A whisper language code, or undefined to detect. */
  language?: string;
  /** Whisper's translate task (into English). */
  translate: boolean;
}

interface Loaded {
  name: WhisperModelName;
  model: NativeModel;
  memoryMb: number;
  users: number;
  lastUsed: number;
}

export interface WhisperModelStatus {
  name: WhisperModelName;
  size: string;
  languages: number;
  installed: boolean;
  loaded: boolean;
}

export class WhisperPool {
  private readonly loaded = new Map<WhisperModelName, Loaded>();
  private readonly loading = new Map<WhisperModelName, Promise<Loaded>>();
  private readonly slots: Semaphore;

  constructor(private readonly options: WhisperPoolOptions) {
    this.slots = new Semaphore(options.parallel);
  }

  get parallel(): number {
    return this.options.parallel;
  }

  path(name: WhisperModelName): string {
    return join(this.options.dir, whisperModel(name).file);
  }

  async isInstalled(name: WhisperModelName): Promise<boolean> {
    return stat(this.path(name)).then((s) => s.isFile() && s.size > 0, () => false);
  }

  async status(): Promise<WhisperModelStatus[]> {
    return Promise.all(WHISPER_MODELS.map(async (m) => ({
      name: m.name, size: m.size, languages: m.languages,
      installed: await this.isInstalled(m.name),
      loaded: this.loaded.has(m.name),
    })));
  }

  /**
   * Decodes one chunk (16 kHz mono) and returns whisper's segments with token timestamps.
   * Waits for a free decoding slot; `onSegment` sees each segment as whisper finishes it.
   */
  async decode(name: WhisperModelName, pcm: Float32Array, params: DecodeParams, onSegment?: (segment: WhisperSegment) => void): Promise<WhisperSegment[]> {
    const release = await this.slots.acquire();
    const entry = await this.acquire(name).catch((err: unknown) => { release(); throw err; });
    try {
      const task = await smartWhisper().TranscribeTask.run(entry.model, pcm, {
        format: "detail",
        token_timestamps: true,
        strategy: 0, // greedy, with whisper's temperature fallback
        n_threads: this.options.threads,
        translate: params.translate,
        language: params.language ?? "auto",
        suppress_non_speech_tokens: true,
        no_context: true,
        ...(this.options.temperatureFallback === false ? { temperature_inc: 0 } : {}),
      });
      if (onSegment) task.on("transcribed", onSegment);
      const result = await task.result;
      if (!Array.isArray(result)) throw new EngineError(`whisper failed on this audio: ${result instanceof Error ? result.message : String(result)}`);
      return result;
    } finally {
      entry.users--;
      entry.lastUsed = Date.now();
      release();
    }
  }

  private async acquire(name: WhisperModelName): Promise<Loaded> {
    let entry = this.loaded.get(name);
    if (!entry) {
      let pending = this.loading.get(name);
      if (!pending) {
        pending = this.load(name).finally(() => this.loading.delete(name));
        this.loading.set(name, pending);
      }
      entry = await pending;
    }
    entry.users++;
    entry.lastUsed = Date.now();
    return entry;
  }

  private async load(name: WhisperModelName): Promise<Loaded> {
    const file = this.path(name);
    const size = await stat(file).then((s) => s.size, () => { throw new EngineError(`whisper model "${name}" is not installed (${file})`); });
    const memoryMb = Math.ceil((size / 1024 ** 2) * 1.25 + 64 * this.options.parallel);
    await this.makeRoom(memoryMb);
    const started = Date.now();
    const model = await smartWhisper().WhisperModel.load(file, this.options.gpu).catch((err: unknown) => {
      throw new EngineError(`whisper model "${name}" failed to load from ${file}: ${err instanceof Error ? err.message : String(err)}`);
    });
    const entry: Loaded = { name, model, memoryMb, users: 0, lastUsed: Date.now() };
    this.loaded.set(name, entry);
    this.options.logger.info({ model: name, file, memoryMb, ms: Date.now() - started }, "whisper model loaded");
    return entry;
  }

  /** Unloads idle models, least recently used first, until `needMb` more fits the budget. */
  private async makeRoom(needMb: number): Promise<void> {
    const used = () => [...this.loaded.values()].reduce((a, e) => a + e.memoryMb, 0);
    while (used() + needMb > this.options.memoryBudgetMb) {
      const idle = [...this.loaded.values()].filter((e) => e.users === 0).sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (!idle) {
        this.options.logger.warn({ needMb, usedMb: used(), budgetMb: this.options.memoryBudgetMb }, "whisper memory budget exceeded: every loaded model is busy");
        return;
      }
      await this.unload(idle.name, "memory budget");
    }
  }

  private async unload(name: WhisperModelName, reason: string): Promise<void> {
    const entry = this.loaded.get(name);
    if (!entry) return;
    this.loaded.delete(name);
    await entry.model.free();
    this.options.logger.info({ model: name, reason }, "whisper model unloaded");
  }

  async dispose(): Promise<void> {
    await Promise.allSettled([...this.loading.values()]);
    for (const name of [...this.loaded.keys()]) await this.unload(name, "shutdown");
  }
}

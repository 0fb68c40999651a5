/**
 * The models of one whisper engine process: loading on first use, keeping them loaded, and
 * unloading the least recently used idle one when the process's memory budget would be exceeded.
 * Decodes share a loaded model on parallel whisper states (the addon makes a fresh state per call).
 */
import { stat } from "node:fs/promises";
import type { WhisperModelName } from "../../../models/whisper.js";
import { EngineError } from "../errors.js";
import type { NativeModel, WhisperAddon } from "./native.js";

interface Loaded {
  name: WhisperModelName;
  model: NativeModel;
  memoryMb: number;
  users: number;
  lastUsed: number;
}

export interface ModelCacheOptions {
  /** The loaded addon. */
  addon: WhisperAddon;
  /** Models on the GPU (the addon's backends found one). */
  gpu: boolean;
  /** Loaded models may take this many MiB together before idle ones are unloaded. */
  memoryBudgetMb: number;
  /** Decodes running at once on this process (each state takes memory). */
  parallel: number;
  /** A line for the agent's log. */
  log: (level: "info" | "warn", fields: Record<string, unknown>, message: string) => void;
  /** Called with the loaded models whenever the set changes. */
  onChange: (loaded: WhisperModelName[]) => void;
}

export class ModelCache {
  private readonly loaded = new Map<WhisperModelName, Loaded>();
  private readonly loading = new Map<WhisperModelName, Promise<Loaded>>();

  constructor(private readonly options: ModelCacheOptions) {}

  /** Runs `work` on model `name` (from `file`, loaded if need be), which stays loaded meanwhile. */
  async use<T>(name: WhisperModelName, file: string, work: (model: NativeModel) => Promise<T>): Promise<T> {
    const entry = await this.acquire(name, file);
    try {
      return await work(entry.model);
    } finally {
      entry.users--;
      entry.lastUsed = Date.now();
    }
  }

  private async acquire(name: WhisperModelName, file: string): Promise<Loaded> {
    let entry = this.loaded.get(name);
    if (!entry) {
      let pending = this.loading.get(name);
      if (!pending) {
        pending = this.load(name, file).finally(() => this.loading.delete(name));
        this.loading.set(name, pending);
      }
      entry = await pending;
    }
    entry.users++;
    entry.lastUsed = Date.now();
    return entry;
  }

  private async load(name: WhisperModelName, file: string): Promise<Loaded> {
    const size = await stat(file).then(
      (s) => s.size,
      () => {
        throw new EngineError(`whisper model "${name}" is not installed (${file})`);
      },
    );
    const memoryMb = Math.ceil((size / 1024 ** 2) * 1.25 + 64 * this.options.parallel);
    await this.makeRoom(memoryMb);
    const started = Date.now();
    const model = await this.options.addon.loadModel(file, { gpu: this.options.gpu }).catch((err: unknown) => {
      throw new EngineError(`whisper model "${name}" failed to load from ${file}: ${err instanceof Error ? err.message : String(err)}`);
    });
    const entry: Loaded = { name, model, memoryMb, users: 0, lastUsed: Date.now() };
    this.loaded.set(name, entry);
    this.options.onChange([...this.loaded.keys()]);
    this.options.log("info", { model: name, file, memoryMb, ms: Date.now() - started }, "whisper model loaded");
    return entry;
  }

  /** Unloads idle models, least recently used first, until `needMb` more fits the budget. */
  private async makeRoom(needMb: number): Promise<void> {
    const used = () => [...this.loaded.values()].reduce((a, e) => a + e.memoryMb, 0);
    while (used() + needMb > this.options.memoryBudgetMb) {
      const idle = [...this.loaded.values()].filter((e) => e.users === 0).sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (!idle) {
        this.options.log("warn", { needMb, usedMb: used(), budgetMb: this.options.memoryBudgetMb }, "whisper memory budget exceeded: every loaded model is busy");
        return;
      }
      await this.unload(idle.name, "memory budget");
    }
  }

  private async unload(name: WhisperModelName, reason: string): Promise<void> {
    const entry = this.loaded.get(name);
    if (!entry) return;
    this.loaded.delete(name);
    this.options.onChange([...this.loaded.keys()]);
    await entry.model.free();
    this.options.log("info", { model: name, reason }, "whisper model unloaded");
  }
}

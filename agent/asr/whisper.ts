/**
 * Whisper models through Kiln's whisper addon, in supervised engine processes: which catalog models
 * are installed (`ggml-<name>.bin` in the whisper directory), and sessions, one per job run, each
 * leasing one engine process (engine/whisper-engine.ts) for its decodes, so that a native crash
 * fails that job alone. A returned engine keeps its models loaded for the next session; a crashed
 * one is dropped and the next session gets a fresh one. Decodes running at once across all
 * sessions are bounded by `parallel`.
 */
import { join } from "node:path";
import type { Logger } from "../../core/log.js";
import { untilAborted } from "../../core/abort.js";
import { nonEmptyFile } from "../../core/disk.js";
import { Semaphore } from "../../core/semaphore.js";
import { whisperFiles, WhisperCatalog, type WhisperModelName } from "../../models/whisper.js";
import { EngineError, JobAbortedError } from "./errors.js";
import { chooseWhisperBackend, type WhisperBackend, type WhisperCompute } from "./engine/backend.js";
import { WhisperEngine } from "./engine/whisper-engine.js";
import type { DecodeParams, WhisperSegment } from "./engine/whisper-protocol.js";

export type { DecodeParams, WhisperSegment, WhisperToken } from "./engine/whisper-protocol.js";

/** Fetches a catalog model that is not installed (an instance's on-demand download, `hub/`). */
export interface WhisperFetcher {
  /** Installs the model; `onProgress` is told how the download goes. Rejects with a message naming the model and the hub. */
  fetch(name: WhisperModelName, onProgress: (p: FetchProgress) => void, signal: AbortSignal): Promise<void>;
  /** The download of the model under way, if any. */
  progress(name: WhisperModelName): Promise<FetchProgress | undefined>;
}

export interface FetchProgress {
  downloadedBytes: number;
  /** 0 while unknown. */
  totalBytes: number;
  /** Seconds left at the current speed; Infinity while unknown. */
  etaSeconds: number;
}

/** The share of a download done, 0 to 1 (0 while its size is unknown). */
export const shareDone = (p: FetchProgress): number => (p.totalBytes > 0 ? Math.min(1, p.downloadedBytes / p.totalBytes) : 0);

export interface WhisperPoolOptions {
  /** Folder holding the catalog's `ggml-*.bin` files. */
  dir: string;
  /** The models jobs may name, and their files. Default: the built-in catalog. */
  catalog?: WhisperCatalog;
  /** Fetches models that are not installed when a job names one. Default: none (such a job is refused). */
  fetcher?: WhisperFetcher;
  /** The models the fetcher may fetch. Default: every catalog model. */
  fetchable?: readonly WhisperModelName[];
  /**
   * Where whisper computes: `auto` takes the first of CUDA and Vulkan whose backend finds a GPU,
   * else the CPU; `cuda` / `vulkan` only that one, else the CPU (with a warning); `cpu` never
   * looks for a GPU (engine/backend.ts).
   */
  compute: WhisperCompute;
  /**
   * Loaded models may take this many MiB together in one engine process before its idle ones
   * are unloaded. Each engine process (one per open session, plus the idle ones) has this budget.
   */
  memoryBudgetMb: number;
  /** Whisper decodes running at once across all sessions (each on its own state). */
  parallel: number;
  /** Compute threads per decode. */
  threads: number;
  /**
   * Whisper's temperature fallback: re-decode a window at rising temperatures when the text looks
   * degenerate (compression ratio, log-probability). Default true; benchmarks turn it off on both
   * sides, since random-weight models trip it on every window.
   */
  temperatureFallback?: boolean;
  /** Idle engine processes kept warm (models loaded) for the next sessions. Default 1. */
  idleEngines?: number;
  /** An idle engine process beyond `idleEngines` exits after this many milliseconds unused. Default 60 000. */
  idleExitMs?: number;
  /** At `dispose()`, milliseconds between SIGTERM and SIGKILL of an engine process. Default 2000. */
  stopGraceMs?: number;
  logger: Logger;
}

export interface WhisperModelStatus {
  name: WhisperModelName;
  size: string;
  /** Bytes of its file. */
  size_bytes: number;
  languages: number;
  installed: boolean;
  /** While its file downloads: the share downloaded, 0 to 1. */
  downloading?: number;
  /** Whether a job may name it while it is not installed (the instance downloads it first). */
  on_demand: boolean;
  /** Loaded in one of the engine processes. */
  loaded: boolean;
}

/** An engine process as `engines()` lists it. */
export interface WhisperEngineInfo {
  pid: number;
  /** The session leasing it (the job id), or null while it is idle. */
  label: string | null;
}

export interface DecodeOptions {
  /** Stops waiting: the decode rejects with `JobAbortedError` (whisper finishes the chunk unseen). */
  signal?: AbortSignal;
  /** Called once the engine has the model loaded and whisper runs on this audio. */
  onStarted?: () => void;
}

/** What a session needs of its pool. */
interface SessionHost {
  slot(): Promise<() => void>;
  path(name: WhisperModelName): Promise<string>;
  giveBack(): void;
  /** Counts a chunk whisper finished. */
  decoded(): void;
}

export class WhisperPool {
  private readonly slots: Semaphore;
  private readonly live = new Set<WhisperEngine>();
  /** Idle engines, the most recently returned last. */
  private readonly idle: WhisperEngine[] = [];
  private readonly idleTimers = new Map<WhisperEngine, NodeJS.Timeout>();
  private disposed = false;
  private chosen: Promise<WhisperBackend> | undefined;
  /** Chunks whisper has decoded since this pool was made (`kiln_asr_chunks_decoded_total`). */
  chunksDecoded = 0;

  constructor(private readonly options: WhisperPoolOptions) {
    this.slots = new Semaphore(options.parallel);
  }

  get parallel(): number {
    return this.options.parallel;
  }

  get catalog(): WhisperCatalog {
    return this.options.catalog ?? WhisperCatalog.builtin;
  }

  /** Whether a job may name some model that is not installed (it is fetched first). */
  get fetches(): boolean {
    return this.options.fetcher !== undefined;
  }

  /** Whether a job may name this model when it is not installed (`--fetch-models`; none with `--offline`). */
  fetchable(name: WhisperModelName): boolean {
    const allowed = this.options.fetchable;
    return this.fetches && this.catalog.has(name) && (!allowed?.length || allowed.includes(name));
  }

  /** The model's file: the catalog's name, or the older `ggml-<name>.bin` an operator copied in (models/whisper.ts#whisperFiles), whichever is installed. */
  async path(name: WhisperModelName): Promise<string> {
    return (await this.installedFile(name)) ?? join(this.options.dir, this.model(name).file);
  }

  private model(name: WhisperModelName) {
    const model = this.catalog.get(name);
    if (!model) throw new EngineError(`whisper model "${name}" is not in this node's catalog`);
    return model;
  }

  /** The model's installed file (a regular file with bytes in it, as ModelHub judges it too), if any. */
  private async installedFile(name: WhisperModelName): Promise<string | undefined> {
    for (const file of whisperFiles(this.model(name))) if (await nonEmptyFile(join(this.options.dir, file))) return join(this.options.dir, file);
    return undefined;
  }

  /**
   * Installs the model if it is not (with a fetcher), telling `onProgress` how the download goes
   * only when one runs. Without a fetcher a missing model is left to fail at load.
   */
  async ensure(name: WhisperModelName, onProgress: (p: FetchProgress) => void, signal: AbortSignal): Promise<void> {
    if ((await this.isInstalled(name)) || !this.options.fetcher || !this.fetchable(name)) return;
    // told at once: the hub is asked before the first byte comes
    onProgress({ downloadedBytes: 0, totalBytes: this.catalog.get(name)?.sizeBytes ?? 0, etaSeconds: Infinity });
    await this.options.fetcher.fetch(name, onProgress, signal);
  }

  async isInstalled(name: WhisperModelName): Promise<boolean> {
    return (await this.installedFile(name)) !== undefined;
  }

  async status(): Promise<WhisperModelStatus[]> {
    const loaded = new Set([...this.live].flatMap((e) => e.loaded));
    return Promise.all(
      this.catalog.models.map(async (m) => {
        const download = await this.options.fetcher?.progress(m.name);
        return {
          name: m.name,
          size: m.size,
          size_bytes: m.sizeBytes,
          languages: m.languages,
          installed: await this.isInstalled(m.name),
          on_demand: this.fetchable(m.name),
          ...(download ? { downloading: shareDone(download) } : {}),
          loaded: loaded.has(m.name),
        };
      }),
    );
  }

  /** The prebuilt folder whisper runs on, chosen (by probing) when first asked. */
  backend(): Promise<WhisperBackend> {
    this.chosen ??= chooseWhisperBackend(this.options.compute, this.options.logger);
    return this.chosen;
  }

  /** The engine processes running now, and the session leasing each. */
  engines(): WhisperEngineInfo[] {
    return [...this.live].flatMap((e) => (e.pid === undefined ? [] : [{ pid: e.pid, label: e.label }]));
  }

  /**
   * Opens a session for one job run (`label`: the job id): it leases an engine process of its
   * own, idle and warm if there is one, else a fresh one, until `close()`.
   * Throws `JobAbortedError` once the pool is disposed.
   */
  session(label: string): WhisperSession {
    if (this.disposed) throw new JobAbortedError();
    const engine = this.idle.pop() ?? this.spawn(label);
    this.cancelRetirement(engine);
    engine.label = label;
    return new WhisperSession(label, engine, {
      slot: () => this.slots.acquire(),
      path: (name) => this.path(name),
      giveBack: () => this.giveBack(engine),
      decoded: () => void this.chunksDecoded++,
    });
  }

  /** Decodes one chunk in a session of its own (see `WhisperSession.decode`). */
  async decode(name: WhisperModelName, pcm: Float32Array, params: DecodeParams, onSegment?: (segment: WhisperSegment) => void, options?: DecodeOptions): Promise<WhisperSegment[]> {
    const session = this.session("decode");
    try {
      return await session.decode(name, pcm, params, onSegment, options);
    } finally {
      await session.close();
    }
  }

  /** Ends every engine process (SIGTERM, then SIGKILL after the grace); decodes in flight reject with `JobAbortedError`. */
  async dispose(): Promise<void> {
    this.disposed = true;
    for (const timer of this.idleTimers.values()) clearTimeout(timer);
    this.idleTimers.clear();
    this.idle.length = 0;
    await Promise.all([...this.live].map((e) => e.stop(this.options.stopGraceMs ?? 2000)));
  }

  private spawn(label: string): WhisperEngine {
    const { options } = this;
    const settings = { memoryBudgetMb: options.memoryBudgetMb, parallel: options.parallel, threads: options.threads, temperatureFallback: options.temperatureFallback !== false };
    const backend = this.backend().then((b) => ({ backend: b.kind, gpu: b.gpu }));
    const engine = new WhisperEngine(settings, backend, options.logger, (gone) => this.forget(gone));
    this.live.add(engine);
    options.logger.info({ engine: engine.pid, session: label }, "whisper engine process started");
    return engine;
  }

  /** A session is done with `engine`: it waits idle for the next one, unless it has ended. */
  private giveBack(engine: WhisperEngine): void {
    if (!engine.alive || this.disposed) return;
    engine.label = null;
    this.idle.push(engine);
    this.retireExtraIdle();
  }

  /** Idle engines beyond the newest `idleEngines` exit after `idleExitMs` unless a session takes them first. */
  private retireExtraIdle(): void {
    const keep = this.options.idleEngines ?? 1;
    for (const engine of this.idle.slice(0, Math.max(0, this.idle.length - keep))) {
      if (this.idleTimers.has(engine)) continue;
      const timer = setTimeout(() => {
        this.idleTimers.delete(engine);
        const at = this.idle.indexOf(engine);
        if (at < 0 || this.idle.length <= keep) return;
        this.idle.splice(at, 1);
        this.options.logger.info({ engine: engine.pid }, "idle whisper engine process exits");
        void engine.stop(this.options.stopGraceMs ?? 2000);
      }, this.options.idleExitMs ?? 60_000);
      timer.unref();
      this.idleTimers.set(engine, timer);
    }
  }

  private cancelRetirement(engine: WhisperEngine): void {
    clearTimeout(this.idleTimers.get(engine));
    this.idleTimers.delete(engine);
  }

  /** An engine process has ended (crashed, retired or stopped): no session gets it again. */
  private forget(engine: WhisperEngine): void {
    this.live.delete(engine);
    const at = this.idle.indexOf(engine);
    if (at >= 0) this.idle.splice(at, 1);
    this.cancelRetirement(engine);
  }
}

/**
 * One job run's lease of an engine process. Its decodes run there (at most `parallel` at once
 * across the pool); if that process crashes, they and every later one reject with the crash
 * `EngineError`. `close()` returns the process to the pool.
 */
export class WhisperSession {
  private closing: Promise<void> | undefined;

  constructor(
    readonly label: string,
    private readonly engine: WhisperEngine,
    private readonly host: SessionHost,
  ) {}

  /** The leased engine process's id. */
  get pid(): number | undefined {
    return this.engine.pid;
  }

  /**
   * Decodes one chunk (16 kHz mono) and returns whisper's segments with token timestamps.
   * Waits for a free decoding slot; `onSegment` sees each segment as whisper finishes it.
   */
  async decode(
    name: WhisperModelName,
    pcm: Float32Array,
    params: DecodeParams,
    onSegment?: (segment: WhisperSegment) => void,
    options: DecodeOptions = {},
  ): Promise<WhisperSegment[]> {
    const { signal, onStarted } = options;
    this.check(signal);
    const release = await this.host.slot();
    let work: Promise<WhisperSegment[]>;
    try {
      this.check(signal);
      work = this.engine.decode(name, await this.host.path(name), pcm, params, { ...(onSegment ? { onSegment } : {}), ...(onStarted ? { onStarted } : {}) });
    } catch (err) {
      release();
      throw err;
    }
    // The slot stays taken until the engine is done with the audio, even if the caller stops waiting.
    void work.then(() => {
      this.host.decoded();
      release();
    }, release);
    return untilAborted(work, signal, { reason: () => new JobAbortedError() });
  }

  /**
   * Returns the engine process to the pool once the decodes still running on it end (their
   * results are dropped). Later decodes on this session are refused. Need not be awaited.
   */
  close(): Promise<void> {
    this.closing ??= this.engine.whenIdle().then(() => this.host.giveBack());
    return this.closing;
  }

  private check(signal?: AbortSignal): void {
    if (signal?.aborted) throw new JobAbortedError();
    if (this.closing) throw new Error(`whisper session ${this.label} is closed`);
    if (this.engine.error) throw this.engine.error;
  }
}

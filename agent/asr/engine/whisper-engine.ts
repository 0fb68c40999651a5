/**
 * The agent's side of one whisper engine process (engine/whisper-child.ts): decodes sent by id,
 * their segments and outcomes routed back, and supervision. When the process dies unexpectedly
 * (a signal, a non-zero exit, its IPC channel lost), every decode in flight on it rejects with an
 * `EngineError` saying the engine crashed, and so does every later one; the agent lives on.
 */
import type { ChildProcess } from "node:child_process";
import type { Logger } from "../../../core/log.js";
import type { WhisperModelName } from "../../../models/whisper.js";
import { EngineError, JobAbortedError } from "../errors.js";
import { describeExit } from "../../../core/child.js";
import { forkEngine } from "./fork.js";
import type { DecodeParams, FromEngine, ToEngine, WhisperEngineConfig, WhisperSegment } from "./whisper-protocol.js";

/** Callbacks of one decode. */
export interface DecodeHooks {
  /** Sees each segment as whisper finishes it. */
  onSegment?: (segment: WhisperSegment) => void;
  /** Called once the model is loaded and whisper runs on the audio. */
  onStarted?: () => void;
}

/** An engine's settings apart from its backend. */
export type EngineSettings = Omit<WhisperEngineConfig, "backend" | "gpu">;
/** The prebuilt folder to load and whether models go on the GPU. */
export type EngineBackend = Pick<WhisperEngineConfig, "backend" | "gpu">;

interface Pending extends DecodeHooks {
  resolve(segments: WhisperSegment[]): void;
  reject(err: unknown): void;
}

export class WhisperEngine {
  /** The session that leases this engine, or null while it is idle (set by WhisperPool). */
  label: string | null = null;
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private readonly ready: Promise<void>;
  private readonly closed: Promise<void>;
  private readonly idleWaiters: (() => void)[] = [];
  private inFlight = 0;
  private nextId = 0;
  private models: WhisperModelName[] = [];
  private stopping = false;
  private failure: Error | undefined;

  /**
   * Forks the process and configures it with `settings` on `backend` once both are known (the
   * backend may still be probed); `onGone` is called once when it has ended, whatever the cause.
   */
  constructor(
    settings: EngineSettings,
    backend: Promise<EngineBackend> | EngineBackend,
    private readonly logger: Logger,
    onGone: (engine: WhisperEngine) => void,
  ) {
    const config = Promise.resolve(backend).then((b): WhisperEngineConfig => ({ ...settings, ...b }));
    // Each decode holds a libuv thread for its whole run (and a model load one more): room for all.
    const threadpool = Math.max(4, settings.parallel + 1, Number(process.env.UV_THREADPOOL_SIZE) || 0);
    this.child = forkEngine("engine/whisper-child.js", { UV_THREADPOOL_SIZE: String(threadpool) });
    let markReady!: () => void;
    let failReady!: (err: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    this.ready.catch(() => undefined); // awaited by decodes; never an unhandled rejection meanwhile
    let markClosed!: () => void;
    this.closed = new Promise<void>((resolve) => {
      markClosed = resolve;
    });

    const gone = (err: Error) => {
      if (this.failure) return;
      this.failure = err;
      failReady(err);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      this.models = [];
      markClosed();
      onGone(this);
    };
    this.child.on("message", (m: FromEngine) => {
      if (m.kind === "ready") {
        void config.then((c) => {
          this.post({ kind: "configure", config: c });
          markReady();
        });
      } else {
        this.receive(m);
      }
    });
    // Without its channel the process is of no use: end it, and `close` reports the crash.
    this.child.on("disconnect", () => {
      if (!this.stopping) this.kill();
    });
    this.child.on("error", (err) => {
      if (this.child.pid === undefined) return gone(new EngineError(`the whisper engine process failed to start: ${err.message}`, { cause: err }));
      logger.error({ engine: this.pid, err }, "whisper engine process channel failed");
      this.kill();
    });
    this.child.on("close", (code, signal) => {
      if (this.stopping) return gone(new JobAbortedError());
      const how = describeExit(code, signal);
      logger.error({ engine: this.pid, exit: how, session: this.label }, "whisper engine process crashed");
      gone(new EngineError(`the whisper engine process crashed (${how})`));
    });
  }

  /** The process id (undefined only when it could not be started). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether the process still runs (false once it has ended, crashed or stopped). */
  get alive(): boolean {
    return this.failure === undefined;
  }

  /** Why the process ended: the error its decodes rejected with; undefined while it runs. */
  get error(): Error | undefined {
    return this.failure;
  }

  /** The models loaded in this process. */
  get loaded(): readonly WhisperModelName[] {
    return this.models;
  }

  /** Decodes one chunk; rejects with the crash `EngineError` if the process dies meanwhile. */
  async decode(model: WhisperModelName, file: string, pcm: Float32Array, params: DecodeParams, hooks: DecodeHooks = {}): Promise<WhisperSegment[]> {
    this.inFlight++;
    try {
      if (this.failure) throw this.failure;
      await this.ready;
      const id = this.nextId++;
      return await new Promise<WhisperSegment[]>((resolve, reject) => {
        if (this.failure) return reject(this.failure);
        this.pending.set(id, { resolve, reject, ...hooks });
        this.post({ kind: "decode", id, model, file, pcm, params }, (err) => {
          // A closed channel means the process is going: `close` rejects with the crash.
          if (this.child.connected) this.take(id)?.reject(new EngineError(`could not send audio to the whisper engine process: ${err.message}`, { cause: err }));
        });
      });
    } finally {
      if (--this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /** Resolves once no decode runs on this engine (or it has ended). */
  whenIdle(): Promise<void> {
    if (this.inFlight === 0 || this.failure) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Ends the process: SIGTERM, then SIGKILL after `graceMs`. Decodes in flight reject with
   * `JobAbortedError`. Resolves once the process is gone.
   */
  async stop(graceMs: number): Promise<void> {
    if (!this.failure) {
      this.stopping = true;
      this.child.kill("SIGTERM");
      const timer = setTimeout(() => this.kill(), graceMs);
      await this.closed;
      clearTimeout(timer);
    }
  }

  private kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }

  private post(m: ToEngine, onError?: (err: Error) => void): void {
    if (!this.child.connected) return;
    this.child.send(m, (err) => {
      if (err) onError?.(err);
    });
  }

  private take(id: number): Pending | undefined {
    const p = this.pending.get(id);
    this.pending.delete(id);
    return p;
  }

  private receive(m: Exclude<FromEngine, { kind: "ready" }>): void {
    switch (m.kind) {
      case "started":
        this.hook(m.id, (p) => p.onStarted?.());
        break;
      case "segment":
        this.hook(m.id, (p) => p.onSegment?.(m.segment));
        break;
      case "done":
        this.take(m.id)?.resolve(m.segments);
        break;
      case "error":
        this.take(m.id)?.reject(new EngineError(m.message));
        break;
      case "models":
        this.models = m.loaded;
        break;
      case "log":
        this.logger[m.level]({ ...m.fields, engine: this.pid }, m.message);
        break;
    }
  }

  /** Calls a decode's hook; one that throws fails that decode, never the agent. */
  private hook(id: number, call: (p: Pending) => void): void {
    const p = this.pending.get(id);
    if (!p) return;
    try {
      call(p);
    } catch (err) {
      this.take(id)?.reject(err);
    }
  }
}

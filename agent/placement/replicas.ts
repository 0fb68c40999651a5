/**
 * The replicas a scheduler places on this node (an agent started without `--serve`): each `load`
 * fetches the model through the node's hub client when it is a hub reference (sha256, resume),
 * loads it into the chat engine with the catalog's context and sequences (and its speculative
 * decoding, a draft model fetched the same way), and reports each step;
 * `unload` frees it once its requests end. Loads run one at a time, so memory is never taken twice
 * over by two loads starting together.
 *
 * Memory is offered per device and accounted here: each device offers its memory, capped by
 * `--memory-budget` (shared over the devices in proportion to their size; on a CPU node the budget is
 * the one device), and each replica holds the bytes per device its load order named, until it is
 * unloaded. That is what heartbeats report as free.
 */
import { stat } from "node:fs/promises";
import { isAbsolute } from "node:path";
import type { Logger } from "../../core/log.js";
import { Semaphore } from "../../core/semaphore.js";
import { parseSpeculation, type Speculation } from "../../core/speculation.js";
import type { ModelHub } from "../../hub/index.js";
import type { LlmEngine, ModelPool } from "../llm/index.js";

/** A load the scheduler ordered. */
export interface LoadRequest {
  /** The catalog id the replica serves (and any aliases the scheduler resolves itself). */
  modelId: string;
  /** `hf:…` reference, or an absolute path to a `.gguf` file on this node. */
  source: string;
  contextSize: number;
  sequences: number;
  /** Bytes it holds per device, as the scheduler planned. */
  split: readonly number[];
  /**
   * Speculative decoding, as the catalog writes it: `lookup`, or `draft:SOURCE` (a draft model,
   * SOURCE as `source` is: an `hf:` reference, pulled like the model, or an absolute path to a `.gguf`
   * file on this node). None when unset or empty.
   */
  speculative?: string;
}

export type ReplicaPhase = "loading" | "ready" | "failed" | "unloaded";

/** A replica's state, as reported to every scheduler. */
export interface ReplicaReport {
  modelId: string;
  phase: ReplicaPhase;
  /** 0–1 while loading (the download, then the load). */
  progress: number;
  /** Why it failed. */
  reason?: string;
  /** With "ready": its pool. */
  pool?: ModelPool;
  split: readonly number[];
}

/** One device's memory as this node offers it. */
export interface OfferedDevice {
  name: string;
  totalBytes: number;
  freeBytes: number;
}

interface Replica {
  request: LoadRequest;
  phase: ReplicaPhase;
  /** An unload is under way: its memory counts as freed for the next load, which waits for it. */
  unloading?: Promise<void>;
  progress: number;
  /** When its progress was last reported (performance.now()). */
  reportedAt: number;
  stop: AbortController;
  done: Promise<void>;
}

export interface ReplicasOptions {
  engine: LlmEngine;
  hub: ModelHub;
  /** Each device's memory (GPUs, or the node's memory on a CPU node), in bytes. */
  devices: readonly { name: string; totalBytes: number }[];
  /** `--memory-budget`: the most the node offers, all devices together. Default: all of it. */
  budgetBytes?: number;
  /** Told of every change (broadcast to the schedulers). */
  report: (report: ReplicaReport) => void;
  /** `--offline`: an hf: source must be in --models-dir already; nothing is downloaded. Default false. */
  offline?: boolean;
  /** How long an unload waits for the replica's requests to end before it stops them. Default `UNLOAD_GRACE_MS` (60 s). */
  unloadGraceMs?: number;
  logger: Logger;
}

const UNLOAD_GRACE_MS = 60_000;

/**
 * A load's progress is reported each time it has grown by this much: a download (to 0.9 of it), then
 * the weights read into memory (to LOADED_AT), then READY. The scheduler takes a load with no
 * progress for ten minutes as stalled: steps of 1 %, and any gain after PROGRESS_QUIET_MS, keep one
 * that moves from being taken so.
 */
const PROGRESS_STEP = 0.01;
/** The progress once a draft from the hub is downloaded (its download is the first tenth). */
const DRAFT_DOWNLOADED_AT = 0.1;
/** The progress once the model is downloaded from the hub (its weights' load is the rest). */
const DOWNLOADED_AT = 0.9;
/** The progress once every weight is loaded, before the contexts are made and the replica is READY. */
const LOADED_AT = 0.99;
/** Any gain of progress is reported once this long has passed without a report (ms). */
const PROGRESS_QUIET_MS = 60_000;

/** Bounds on what a load order may ask: the link's own checks, whatever the scheduler sends. */
const MAX_CONTEXT = 1_048_576;
const MAX_SEQUENCES = 256;

export class Replicas {
  private readonly replicas = new Map<string, Replica>();
  private readonly turns = new Semaphore(1);
  readonly devices: readonly { name: string; totalBytes: number }[];

  constructor(private readonly options: ReplicasOptions) {
    const total = options.devices.reduce((a, d) => a + d.totalBytes, 0);
    const budget = options.budgetBytes ?? total;
    // the budget shared over the devices in proportion to their size, none past its own memory
    this.devices = options.devices.map((d) => ({ name: d.name, totalBytes: Math.min(d.totalBytes, Math.floor(total > 0 ? (budget * d.totalBytes) / total : 0)) }));
  }

  /** Each device's offer and what the replicas leave free of it (`afterUnloads`: once the unloads under way end). */
  offered(afterUnloads = false): OfferedDevice[] {
    return this.devices.map((d, i) => {
      let held = 0;
      for (const r of this.replicas.values()) if (!(afterUnloads && r.unloading)) held += r.request.split[i] ?? 0;
      return { name: d.name, totalBytes: d.totalBytes, freeBytes: Math.max(0, d.totalBytes - held) };
    });
  }

  /** Every replica's state now (for a scheduler that connects later). */
  reports(): ReplicaReport[] {
    return [...this.replicas.values()].map((r) => this.reportOf(r));
  }

  /** Starts a load; its steps are reported. A second order for a model loaded or loading is answered with its state. */
  load(request: LoadRequest): void {
    const refused = checkRequest(request, this.devices.length);
    if (refused) return this.options.report({ modelId: request.modelId, phase: "failed", progress: 0, reason: refused, split: [] });
    const existing = this.replicas.get(request.modelId);
    // a load ordered while the replica is being unloaded: it is loaded again once that ends
    if (existing?.unloading) return void existing.unloading.then(() => this.load(request));
    if (existing) return this.options.report(this.reportOf(existing));
    // a replica being unloaded to make room (the scheduler orders the unload first) counts as gone: the load waits for it
    const free = this.offered(true);
    const short = request.split.findIndex((b, i) => b > free[i]!.freeBytes);
    if (short >= 0) {
      return this.options.report({
        modelId: request.modelId,
        phase: "failed",
        progress: 0,
        reason: `device ${short} (${this.devices[short]!.name}) has ${free[short]!.freeBytes} bytes free of its offer, and the load asks ${request.split[short]}`,
        split: [],
      });
    }
    const replica: Replica = { request, phase: "loading", progress: 0, reportedAt: performance.now(), stop: new AbortController(), done: Promise.resolve() };
    this.replicas.set(request.modelId, replica);
    this.options.report(this.reportOf(replica));
    replica.done = this.run(replica);
  }

  /** Unloads a replica (stops its load when it still loads); reported once it is gone. */
  async unload(modelId: string): Promise<void> {
    const replica = this.replicas.get(modelId);
    if (!replica) return this.options.report({ modelId, phase: "unloaded", progress: 0, split: [] });
    if (replica.unloading) return replica.unloading;
    replica.unloading = (async () => {
      replica.stop.abort();
      await replica.done;
      // its requests may finish within the grace; past it they are stopped (a stuck request does not hold the memory)
      await this.options.engine.removeModel(modelId, AbortSignal.timeout(this.options.unloadGraceMs ?? UNLOAD_GRACE_MS)).catch((err: unknown) => {
        this.options.logger.error({ model: modelId, err: (err as Error).message }, "unloading a replica failed");
      });
      if (this.replicas.get(modelId) === replica) this.replicas.delete(modelId);
      replica.phase = "unloaded";
      this.options.report(this.reportOf(replica));
    })();
    return replica.unloading;
  }

  private async run(replica: Replica): Promise<void> {
    const { request, stop } = replica;
    let release: (() => void) | undefined;
    try {
      release = await this.turns.acquire(stop.signal);
      // the memory the unloads under way free is what this load was given
      await Promise.all([...this.replicas.values()].map((r) => r.unloading));
      stop.signal.throwIfAborted();
      // checked by load(): malformed values never get here
      let speculative = request.speculative ? (parseSpeculation(request.speculative) as Speculation) : undefined;
      // a draft from the hub first (the first tenth of the progress): it is small, and a wrong one fails the load before the model's download
      const draftFromHub = speculative?.kind === "draft" && speculative.source.startsWith("hf:");
      if (speculative?.kind === "draft") {
        const draft = await this.localFile(replica, speculative.source, 0, DRAFT_DOWNLOADED_AT).catch((err: unknown) => {
          throw new Error(`speculative: the draft model: ${(err as Error).message}`);
        });
        speculative = { kind: "draft", source: draft };
      }
      const downloadFrom = draftFromHub ? DRAFT_DOWNLOADED_AT : 0;
      const path = await this.localFile(replica, request.source, downloadFrom, DOWNLOADED_AT);
      const shape = { contextSize: request.contextSize, sequences: request.sequences, split: request.split, ...(speculative ? { speculative } : {}) };
      // the weights' load is the rest of the progress: a model read from a slow disk for minutes is seen moving, not stalled
      const from = request.source.startsWith("hf:") ? DOWNLOADED_AT : downloadFrom;
      await this.options.engine.addModel([request.modelId], path, shape, stop.signal, (loaded) => {
        this.progressed(replica, from + (LOADED_AT - from) * loaded);
      });
      if (stop.signal.aborted) return; // unload() removes it
      replica.phase = "ready";
      replica.progress = 1;
      this.options.report(this.reportOf(replica));
    } catch (err) {
      if (stop.signal.aborted) return;
      replica.phase = "failed";
      this.replicas.delete(request.modelId);
      const reason = (err as Error).message;
      this.options.logger.warn({ model: request.modelId, source: request.source, reason }, "a replica failed to load");
      this.options.report({ ...this.reportOf(replica), reason, split: [] });
    } finally {
      release?.();
    }
  }

  /**
   * The file `source` names on this node: an `hf:` reference pulled into --models-dir (its download
   * reported as the load's progress from `from` to `to`; with --offline, only one there already), or
   * the path itself. A regular file only: a FIFO or a device would hold the load (and the node's next
   * loads) forever.
   */
  private async localFile(replica: Replica, source: string, from: number, to: number): Promise<string> {
    const { stop } = replica;
    let path = source;
    if (source.startsWith("hf:") && this.options.offline) {
      const cached = await this.options.hub.cached(source);
      if (!cached) throw new Error(`${source} is not in --models-dir and this node is --offline`);
      path = cached;
    } else if (source.startsWith("hf:")) {
      const pulled = await this.options.hub.pull(source, {
        signal: stop.signal,
        onProgress: (p) => this.progressed(replica, from + (p.totalBytes > 0 ? ((to - from) * p.downloadedBytes) / p.totalBytes : 0)),
      });
      path = pulled.path;
    }
    stop.signal.throwIfAborted();
    const file = await stat(path).catch(() => undefined);
    if (!file?.isFile()) throw new Error(`${path} is not a regular file on this node`);
    return path;
  }

  /**
   * A loading replica's progress grew to `progress`: reported once it has grown by PROGRESS_STEP
   * since the last report, or by anything after PROGRESS_QUIET_MS without one (a load so long that
   * its steps come further apart than the scheduler's patience).
   */
  private progressed(replica: Replica, progress: number): void {
    if (replica.phase !== "loading" || replica.stop.signal.aborted || progress <= replica.progress) return;
    const now = performance.now();
    if (progress - replica.progress < PROGRESS_STEP && now - replica.reportedAt < PROGRESS_QUIET_MS) return;
    replica.progress = progress;
    replica.reportedAt = now;
    this.options.report(this.reportOf(replica));
  }

  private reportOf(replica: Replica): ReplicaReport {
    const pool = replica.phase === "ready" ? this.options.engine.modelPools.find((p) => p.modelIds.includes(replica.request.modelId)) : undefined;
    return { modelId: replica.request.modelId, phase: replica.phase, progress: replica.progress, split: replica.request.split, ...(pool ? { pool } : {}) };
  }
}

/** Why a load order cannot be carried out as it stands, or undefined. */
function checkRequest(r: LoadRequest, devices: number): string | undefined {
  if (!/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/.test(r.modelId)) return "the model id is empty or malformed";
  if (!isSource(r.source)) return "the source is neither an hf: reference nor an absolute path to a .gguf file";
  if (!Number.isInteger(r.contextSize) || r.contextSize < 1 || r.contextSize > MAX_CONTEXT) return `context_size must be 1 to ${MAX_CONTEXT}`;
  if (!Number.isInteger(r.sequences) || r.sequences < 1 || r.sequences > MAX_SEQUENCES) return `sequences must be 1 to ${MAX_SEQUENCES}`;
  if (r.split.length !== devices || r.split.some((b) => !Number.isFinite(b) || b < 0)) return `the split names ${r.split.length} devices; this node offers ${devices}`;
  if (r.speculative) {
    const speculation = parseSpeculation(r.speculative);
    if (typeof speculation === "string") return `speculative: ${speculation}`;
    if (speculation.kind === "draft" && !isSource(speculation.source)) return "speculative: the draft's source is neither an hf: reference nor an absolute path to a .gguf file";
  }
  return undefined;
}

/** An `hf:` reference (the hub client checks the rest), or an absolute path to a `.gguf` file with no `..`. */
function isSource(source: string): boolean {
  return source.startsWith("hf:") || (isAbsolute(source) && source.toLowerCase().endsWith(".gguf") && !source.split("/").includes(".."));
}

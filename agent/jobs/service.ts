/**
 * Transcription jobs: accepted uploads wait in a bounded FIFO queue and run a configurable
 * number at a time through the Transcriber. Live progress is kept in memory and written to the
 * store at most once a second; results are written to disk (atomically) before the job is
 * marked completed. At start, jobs a previous run left in `processing` are resumed from their
 * kept upload, or ended as `error` saying why.
 *
 * Each job has a handle, a secret returned once at submission: reading, cancelling or deleting
 * the job needs it (or the agent's token, checked by the HTTP layer). Uploads are charged to the
 * staging budget from their first byte until the job no longer needs the file. Finished jobs are
 * swept after the result TTL or past `maxResults`, with files no job owns (a crash mid-upload).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { ConflictError, NotFoundError, ServiceUnavailableError, TooManyRequestsError } from "../../core/errors.js";
import type { ErrorCode } from "../../core/error-codes.js";
import { duringWork } from "../../core/context.js";
import { matchesDigest, sha256Hex } from "../../core/digest.js";
import type { Logger } from "../../core/log.js";
import { AudioError, EngineError, JobAbortedError } from "../asr/errors.js";
import type { JobPhase } from "../asr/eta.js";
import type { Transcriber } from "../asr/pipeline.js";
import { shareDone, type FetchProgress } from "../asr/whisper.js";
import type { Segment, Transcript } from "../../speech/transcript.js";
import { StagingBudget } from "./budget.js";
import { JobStore, type JobOptions, type JobRow, type JobStatus } from "./store.js";

/**
 * Runs in a row that the agent died in without the job finishing a step (a crash, a kill; not a
 * drain) before the job is given up: its input may be what brings the agent down.
 */
const MAX_ATTEMPTS = 3;
const PERSIST_EVERY_MS = 1000;
/** Most jobs on one page of `list`. */
export const MAX_PAGE = 100;

export interface JobServiceOptions {
  /** Folder for the job database, uploads and results. */
  dataDir: string;
  transcriber: Transcriber;
  /** Jobs transcribing at once. */
  concurrency: number;
  /** Accepted jobs that may wait for a turn (more is a 503). */
  maxQueued: number;
  /** Bytes staged uploads may hold together (see `StagingBudget`). */
  uploadBudgetBytes: number;
  /** Finished jobs are removed this many seconds after they end. */
  resultTtlSeconds: number;
  /** Finished jobs kept at most; the oldest are removed first. */
  maxResults: number;
  /**
   * Installs the job's whisper model when it is not (an on-demand download), telling `onProgress`
   * how it goes; rejects when it cannot. Default: none (the model must be installed).
   */
  prepareModel?: (model: string, onProgress: (p: FetchProgress) => void, signal: AbortSignal) => Promise<void>;
  /** Told of every job that ends (metrics). */
  onFinished?: (outcome: "completed" | "error", audioSeconds?: number, wallSeconds?: number) => void;
  logger: Logger;
}

/** The download a job waits for, as its status shows it. */
export interface DownloadView {
  model: string;
  downloaded_bytes: number;
  total_bytes: number;
  /** Share downloaded, 0 to 1 (0 while the size is unknown). */
  fraction: number;
}

/** `GET /api/status/{id}`. */
export interface JobView {
  job_id: string;
  status: JobStatus;
  /** What a processing job is doing now; null once it has ended. */
  phase: JobPhase | null;
  progress: number;
  estimated_time_remaining: number;
  /** In phase `downloading_model`: how the model's download goes (the job's own progress has not begun). */
  download?: DownloadView;
  /**
   * While the job runs: the segments finished so far, in time order (whisper's, before speaker labels
   * and translation); they only grow. Empty once it has ended: a completed job's are `result.segments`.
   */
  segments: Segment[];
  result: Transcript | null;
  error?: string;
  file_name: string;
  /** Unix seconds. */
  created_at: number;
  /** Unix seconds; null while processing. */
  finished_at: number | null;
}

/** What `POST /api/process` answers for each job: its view and, this once, its handle. */
export type SubmittedJob = JobView & { handle: string };

/** `GET /api/jobs`: a page of jobs, newest first (without results or segments). */
export interface JobList {
  object: "list";
  data: Omit<JobView, "result" | "segments">[];
  has_more: boolean;
  /** The cursor for the next page (`?after=`). */
  last_id: string | null;
}

/** One upload request's share of the staging budget: what it reserved at admission and has not used yet. */
export interface UploadTicket {
  prepaid: number;
}

/** A file streaming or streamed to disk, waiting to become a job. */
export interface StagedUpload {
  id: string;
  path: string;
  fileName: string;
  /** Bytes written so far (charged to the staging budget). */
  bytes: number;
  ticket: UploadTicket;
}

interface Running {
  done: Promise<void>;
  cancel: AbortController;
  /** Whether it holds one of the `concurrency` places (a job waiting for its model's download gives its place back). */
  slot: boolean;
}

interface Live {
  phase: JobPhase;
  progress: number;
  eta: number;
  download?: DownloadView;
  persistedAt: number;
  /** Segments finished so far, in order (the run's; a resumed job starts them again). */
  segments: Segment[];
}

/** What `watch` tells of a job as it runs (`GET /api/jobs/{id}/events`). */
export type JobEvent =
  | { type: "progress"; phase: JobPhase | null; progress: number; estimated_time_remaining: number; download?: DownloadView }
  | { type: "segment"; segment: Segment }
  | { type: "done"; status: JobStatus; error?: string; /** "invalid_audio" when the file was at fault (undecodable, too long). */ code?: ErrorCode };

/** Listeners one job may have at once (each an open event stream). */
export const MAX_WATCHERS_PER_JOB = 16;

export class JobService {
  private readonly store: JobStore;
  private readonly queue: string[] = [];
  private readonly live = new Map<string, Live>();
  private readonly watchers = new Map<string, Set<(event: JobEvent) => void>>();
  private readonly running = new Map<string, Running>();
  /** Places of `concurrency` taken: running jobs, less those waiting for their model's download. */
  private computing = 0;
  /** Jobs whose model arrived, waiting for a place again (they go before the queue). */
  private readonly slotWaiters: (() => void)[] = [];
  /** Uploads streaming now (their folders have no row yet: the sweeper leaves them alone). */
  private readonly staging = new Map<string, StagedUpload>();
  /** Bytes each accepted job's upload holds in the budget, until the file is removed. */
  private readonly held = new Map<string, number>();
  private readonly abort = new AbortController();
  /** Jobs that just failed because of their file, until their end is told (`ended`). */
  private readonly audioFaults = new Set<string>();
  private closed = false;
  readonly budget: StagingBudget;

  constructor(private readonly options: JobServiceOptions) {
    this.store = new JobStore(join(options.dataDir, "jobs.db"));
    this.budget = new StagingBudget({ limitBytes: options.uploadBudgetBytes, dir: options.dataDir });
  }

  get uploadsDir(): string {
    return join(this.options.dataDir, "uploads");
  }

  /** Jobs that transcribe at once. */
  get concurrency(): number {
    return this.options.concurrency;
  }

  /** Jobs transcribing now and jobs waiting for a turn. */
  counts(): { running: number; queued: number } {
    return { running: this.running.size, queued: this.queue.length };
  }

  /**
   * Admits an upload request of `declared` bytes (its Content-Length; absent: unknown), reserving
   * them in the staging budget; 507 when they do not fit. `settle` gives back what it did not use.
   */
  async admit(declared?: number): Promise<UploadTicket> {
    await this.budget.admit(declared ?? 0);
    return { prepaid: declared ?? 0 };
  }

  /** Gives back the part of a request's reservation its files did not take (multipart framing, fields, a refusal). */
  settle(ticket: UploadTicket): void {
    this.budget.unreserve(ticket.prepaid);
    ticket.prepaid = 0;
  }

  /** A fresh job id and the folder its upload goes to. */
  async stage(fileName: string, ticket: UploadTicket): Promise<StagedUpload> {
    const id = randomUUID();
    const dir = join(this.uploadsDir, id);
    const staged = { id, path: join(dir, "input"), fileName, bytes: 0, ticket };
    this.staging.set(id, staged); // before the folder exists: the sweeper never sees it unowned
    await mkdir(dir, { recursive: true });
    return staged;
  }

  /** Charges `bytes` more of a staged upload (from its request's reservation first); throws 507 past the budget. */
  async charge(upload: StagedUpload, bytes: number): Promise<void> {
    const prepaid = Math.min(bytes, upload.ticket.prepaid);
    // Counted on the upload in the same tick as in the budget: a discard meanwhile gives it all back.
    const charged = this.budget.charge(upload, bytes, prepaid);
    upload.ticket.prepaid -= prepaid;
    upload.bytes += bytes;
    await charged.catch((err: unknown) => {
      upload.ticket.prepaid += prepaid;
      upload.bytes -= bytes;
      throw err;
    });
  }

  /** Removes staged uploads that did not become jobs (a rejected request). */
  async discard(uploads: readonly StagedUpload[]): Promise<void> {
    await Promise.all(
      uploads.map(async (u) => {
        await rm(dirname(u.path), { recursive: true, force: true });
        if (this.staging.delete(u.id)) this.budget.release(u.bytes);
      }),
    );
  }

  /** Throws a 503 unless `count` more jobs fit in the queue. */
  ensureRoom(count: number): void {
    const waiting = this.queue.length + this.slotWaiters.length + Math.max(0, this.computing + count - this.options.concurrency);
    if (this.closed || waiting > this.options.maxQueued) {
      throw new ServiceUnavailableError("queue_full", `audio: the transcription queue is full (${this.options.maxQueued} waiting); try again later`);
    }
  }

  /** Turns staged uploads into queued jobs, each with its own handle (returned only here). */
  submit(uploads: readonly StagedUpload[], options: JobOptions): SubmittedJob[] {
    this.ensureRoom(uploads.length);
    // All rows or none: a failure leaves no queued job whose upload the caller then discards.
    const handles = this.store.transaction(() =>
      uploads.map((u) => {
        const handle = `jh_${randomBytes(24).toString("base64url")}`;
        this.store.insert({ id: u.id, fileName: u.fileName, inputPath: u.path, options, eta: 0, handleHash: sha256Hex(handle) });
        return handle;
      }),
    );
    return uploads.map((u, i) => {
      this.staging.delete(u.id);
      this.held.set(u.id, u.bytes);
      this.enqueue(u.id);
      return { ...this.view(u.id)!, handle: handles[i]! };
    });
  }

  /** Whether `credential` is the handle of job `id` (constant-time; false for unknown jobs). */
  ownsJob(id: string, credential: string): boolean {
    const hash = this.store.get(id)?.handleHash;
    return hash !== null && hash !== undefined && matchesDigest(credential, hash);
  }

  /** Resumes or ends the jobs a previous run left in `processing`. */
  async recover(): Promise<void> {
    for (const job of this.store.processing()) {
      const kept = await stat(job.inputPath).then(
        (s) => (s.isFile() ? s : undefined),
        () => undefined,
      );
      if (job.options.fleet) {
        // its scheduler request ended with the link: the result would reach no one
        this.store.fail(job.id, "the agent restarted while this fleet job was processing; the scheduler's request has ended");
        if (kept) await rm(dirname(job.inputPath), { recursive: true, force: true });
        await rm(this.workDir(job.id), { recursive: true, force: true });
      } else if (!kept) {
        this.store.fail(job.id, "engine fault: the agent restarted while this job was processing and its upload is gone; submit the file again");
        await rm(this.workDir(job.id), { recursive: true, force: true });
      } else if (job.attempts >= MAX_ATTEMPTS) {
        this.store.fail(
          job.id,
          `engine fault: the agent stopped ${job.attempts} times in a row while this job was processing, without finishing a step; giving up (the file may be what stops it)`,
        );
        await rm(dirname(job.inputPath), { recursive: true, force: true });
        await rm(this.workDir(job.id), { recursive: true, force: true });
      } else {
        this.budget.hold(kept.size);
        this.held.set(job.id, kept.size);
        this.live.set(job.id, { phase: "queued", progress: job.progress, eta: job.eta, persistedAt: 0, segments: [] });
        this.enqueue(job.id);
        this.options.logger.info({ job: job.id, attempt: job.attempts + 1 }, "resuming interrupted transcription job");
      }
    }
  }

  view(id: string): JobView | undefined {
    const row = this.store.get(id);
    return row && this.viewOf(row);
  }

  private viewOf(row: JobRow): JobView {
    const live = this.live.get(row.id);
    return {
      job_id: row.id,
      status: row.status,
      phase: row.status === "processing" ? (live?.phase ?? "queued") : null,
      progress: row.status === "completed" ? 1 : Math.max(row.progress, live?.progress ?? 0),
      estimated_time_remaining: row.status === "processing" ? (live?.eta ?? row.eta) : 0,
      ...(row.status === "processing" && live?.phase === "downloading_model" && live.download ? { download: live.download } : {}),
      segments: live?.segments ?? [], // the live list itself, not a copy per poll: callers only read it or replace it
      result: null,
      ...(row.error ? { error: row.error } : {}),
      file_name: row.fileName,
      created_at: Math.floor(row.createdAt / 1000),
      finished_at: row.finishedAt === null ? null : Math.floor(row.finishedAt / 1000),
    };
  }

  /** A page of jobs, newest first; `after` is the last job id of the previous page. */
  list(limit: number, after?: string): JobList {
    const cursor = after === undefined ? undefined : this.store.get(after);
    if (after !== undefined && !cursor) throw new NotFoundError("job_not_found", `after: no job "${after}"`);
    const page = this.store.list(limit, cursor);
    const data = page.jobs.map((row) => {
      const { result: _result, segments: _segments, ...view } = this.viewOf(row);
      return view;
    });
    return { object: "list", data, has_more: page.hasMore, last_id: data.at(-1)?.job_id ?? null };
  }

  /**
   * Cancels a job: a queued one at once, a running one between chunks (its upload and work files
   * are removed). 409 when it has already ended.
   */
  async cancel(id: string): Promise<JobView> {
    const row = this.store.get(id);
    if (!row) throw new NotFoundError("job_not_found", `job_id: no job "${id}"`);
    if (row.status !== "processing") throw new ConflictError("job_finished", `job_id: job "${id}" has already ended (${row.status})`);
    const queued = this.queue.indexOf(id);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      this.store.cancel(id);
      this.ended(id);
      await this.removeInput(id, row.inputPath);
    } else {
      const running = this.running.get(id);
      running?.cancel.abort();
      await running?.done;
    }
    this.options.logger.info({ job: id }, "transcription job cancelled");
    const view = this.view(id);
    if (!view) throw new NotFoundError("job_not_found", `job_id: no job "${id}"`); // deleted meanwhile
    return view;
  }

  /** Cancels the job if it runs, then removes its row, upload, work folder and result. */
  async remove(id: string): Promise<void> {
    const row = this.store.get(id);
    if (!row) throw new NotFoundError("job_not_found", `job_id: no job "${id}"`);
    if (row.status === "processing") await this.cancel(id).catch(() => undefined); // it may have ended meanwhile
    // Read again: a job that completed while it was being cancelled has a result file now.
    const current = this.store.get(id);
    if (current) await this.erase(current);
  }

  /**
   * Removes finished jobs past the TTL or past `maxResults`, and files no job owns: upload,
   * work and result entries left by a crash (an upload cut off mid-stream, a result half written).
   * Returns how many jobs and orphaned entries went.
   */
  async sweep(now = Date.now()): Promise<{ jobs: number; orphans: number }> {
    const expired = this.store.expired(now - this.options.resultTtlSeconds * 1000, this.options.maxResults);
    for (const row of expired) await this.erase(row);
    // Each entry is judged on the live state at the moment it would go (jobs start, end and
    // arrive while the sweep awaits the disk), never on a snapshot.
    let orphans = 0;
    const sweepDir = async (dir: string, keep: (name: string) => boolean) => {
      const names = await readdir(dir).catch(() => [] as string[]);
      for (const name of names) {
        if (keep(name)) continue;
        await rm(join(dir, name), { recursive: true, force: true });
        orphans++;
      }
    };
    const known = (id: string) => this.store.get(id) !== undefined;
    await sweepDir(this.uploadsDir, (id) => this.staging.has(id) || known(id));
    // a processing job's work folder holds its checkpoints, queued to resume or running
    await sweepDir(join(this.options.dataDir, "work"), (id) => this.running.has(id) || this.store.get(id)?.status === "processing");
    await sweepDir(join(this.options.dataDir, "results"), (name) => {
      const m = /^(.+)\.json(\.partial)?$/.exec(name);
      return m !== null && (m[2] ? this.running.has(m[1]!) : known(m[1]!)); // a .partial is being written by its running job
    });
    if (expired.length || orphans) this.options.logger.info({ jobs: expired.length, orphans }, "swept finished jobs and orphaned files");
    return { jobs: expired.length, orphans };
  }

  private async erase(row: JobRow): Promise<void> {
    await this.removeInput(row.id, row.inputPath);
    await rm(this.workDir(row.id), { recursive: true, force: true });
    if (row.resultPath) await rm(row.resultPath, { force: true });
    this.store.delete(row.id);
  }

  /** Removes a job's upload and gives its bytes back to the budget. */
  private async removeInput(id: string, inputPath: string): Promise<void> {
    await rm(dirname(inputPath), { recursive: true, force: true });
    const bytes = this.held.get(id);
    if (bytes !== undefined) {
      this.held.delete(id);
      this.budget.release(bytes);
    }
  }

  /** The job's view with its result when completed; 404 for an unknown id. */
  async status(id: string): Promise<JobView> {
    const view = this.view(id);
    if (!view) throw new NotFoundError("job_not_found", `job_id: no job "${id}"`);
    if (view.status === "completed") {
      view.result = await this.result(id);
      view.segments = []; // they are the result's, sent once
    }
    return view;
  }

  /**
   * Calls `listener` with the job's events from now on (progress, each finished segment, the end), after
   * its state now: its progress, the segments finished so far, and its end when it has ended. Returns
   * the unsubscribe. 404 for an unknown job; 429 beyond MAX_WATCHERS_PER_JOB at once.
   */
  async watch(id: string, listener: (event: JobEvent) => void, after = -1): Promise<() => void> {
    const view = await this.status(id);
    const set = this.watchers.get(id) ?? new Set();
    if (set.size >= MAX_WATCHERS_PER_JOB) throw new TooManyRequestsError("too_many_watchers", `job_id: job "${id}" has ${MAX_WATCHERS_PER_JOB} event streams open; close one`);
    // the state and the subscription in one turn: no event falls between them
    const now = this.view(id);
    if (!now) throw new NotFoundError("job_not_found", `job_id: no job "${id}"`); // removed meanwhile
    listener({
      type: "progress",
      phase: now.phase,
      progress: now.progress,
      estimated_time_remaining: now.estimated_time_remaining,
      ...(now.download ? { download: now.download } : {}),
    });
    const segments = now.status === "completed" ? (view.result?.segments ?? []) : now.segments;
    for (const segment of segments) if (segment.id > after) listener({ type: "segment", segment });
    if (now.status !== "processing") listener({ type: "done", status: now.status, ...(now.error ? { error: now.error } : {}) });
    // registered until the caller unsubscribes, ended or not: the cap counts every open stream; a
    // resumed run tells its kept segments again, and those the caller already has are not repeated
    const heard = (event: JobEvent) => {
      if (event.type !== "segment" || event.segment.id > after) listener(event);
    };
    set.add(heard);
    this.watchers.set(id, set);
    return () => {
      set.delete(heard);
      if (set.size === 0 && this.watchers.get(id) === set) this.watchers.delete(id);
    };
  }

  /** Tells the job's watchers of `event`; a listener that throws is dropped, the others still hear it. */
  private emit(id: string, event: JobEvent): void {
    for (const listener of this.watchers.get(id) ?? []) {
      try {
        listener(event);
      } catch {
        this.watchers.get(id)?.delete(listener);
      }
    }
  }

  /** Tells the job's watchers how it ended (as the store now has it); they stay counted until they unsubscribe. */
  private ended(id: string): void {
    const row = this.store.get(id);
    const fault = this.audioFaults.delete(id);
    if (!row || row.status === "processing") return;
    this.emit(id, { type: "done", status: row.status, ...(row.error ? { error: row.error } : {}), ...(fault ? { code: "invalid_audio" } : {}) });
  }

  /** The completed job's transcript; 404 for an unknown id, 409 while it is not completed. */
  async result(id: string): Promise<Transcript> {
    const row = this.store.get(id);
    if (!row) throw new NotFoundError("job_not_found", `job_id: no job "${id}"`);
    if (row.status !== "completed" || !row.resultPath) {
      throw row.status === "error"
        ? new ConflictError("job_failed", `job_id: job "${id}" ended in error: ${row.error ?? "unknown"}`)
        : row.status === "cancelled"
          ? new ConflictError("job_cancelled", `job_id: job "${id}" was cancelled`)
          : new ConflictError("job_not_completed", `job_id: job "${id}" is still processing`);
    }
    const text = await readFile(row.resultPath, "utf8").catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") throw new NotFoundError("job_not_found", `job_id: the result of job "${id}" is gone (deleted or expired)`);
      throw err;
    });
    return JSON.parse(text) as Transcript;
  }

  /** Stops taking jobs, stops running ones between chunks (they resume at the next start). */
  async close(): Promise<void> {
    this.closed = true;
    this.queue.length = 0;
    this.abort.abort();
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
    this.store.close();
  }

  private enqueue(id: string): void {
    this.queue.push(id);
    this.pump();
  }

  private pump(): void {
    while (!this.closed && this.computing < this.options.concurrency) {
      const waiter = this.slotWaiters.shift();
      if (waiter) {
        this.computing++;
        waiter();
        continue;
      }
      const id = this.queue.shift();
      if (id === undefined) return;
      this.computing++;
      const job: Running = { cancel: new AbortController(), slot: true, done: Promise.resolve() };
      job.done = duringWork({ job: id }, () => this.execute(id, job.cancel.signal))
        .catch((err: unknown) => {
          this.options.logger.error({ job: id, err }, "transcription job runner failed");
        })
        .finally(() => {
          this.running.delete(id);
          if (job.slot) this.computing--;
          this.pump();
        });
      this.running.set(id, job);
    }
  }

  /** Gives a running job's place to the next job while it waits (for its model's download). */
  private yieldSlot(id: string): void {
    const job = this.running.get(id);
    if (!job?.slot) return;
    job.slot = false;
    this.computing--;
    this.pump();
  }

  /** Takes a place again for a job that gave its place back, before the queued jobs; rejects with `JobAbortedError` when stopped first. */
  private async takeSlot(id: string, signal: AbortSignal): Promise<void> {
    const job = this.running.get(id);
    if (!job || job.slot) return;
    if (signal.aborted) throw new JobAbortedError();
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const at = this.slotWaiters.indexOf(waiter);
        if (at >= 0) this.slotWaiters.splice(at, 1);
        reject(new JobAbortedError());
      };
      const waiter = () => {
        signal.removeEventListener("abort", onAbort);
        job.slot = true;
        resolve();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.slotWaiters.push(waiter);
      this.pump();
    });
  }

  /** Runs one job to its end. A failure to record its outcome is logged here; `pump` logs anything else. */
  private async execute(id: string, cancelled: AbortSignal): Promise<void> {
    const row = this.store.get(id);
    if (!row) return;
    const { logger } = this.options;
    const started = Date.now();
    const live: Live = this.live.get(id) ?? { phase: "queued", progress: 0, eta: 0, persistedAt: 0, segments: [] };
    live.segments = []; // a resumed run tells its kept segments again
    this.live.set(id, live);
    this.guarded(id, "run", () => this.store.begun(id));
    const tell = () => {
      this.emit(id, { type: "progress", phase: live.phase, progress: live.progress, estimated_time_remaining: live.eta, ...(live.download ? { download: live.download } : {}) });
      if (Date.now() - live.persistedAt >= PERSIST_EVERY_MS) {
        live.persistedAt = Date.now();
        this.guarded(id, "progress", () => this.store.progress(id, live.progress, live.eta));
      }
    };
    let advanced = false;
    const stopped = AbortSignal.any([this.abort.signal, cancelled]);
    try {
      if (this.options.prepareModel) {
        const model = row.options.model;
        await this.options.prepareModel(
          model,
          (p) => {
            // a download may take minutes: the job's place goes to the next job meanwhile
            if (live.phase !== "downloading_model") this.yieldSlot(id);
            live.phase = "downloading_model";
            live.download = {
              model,
              downloaded_bytes: p.downloadedBytes,
              total_bytes: p.totalBytes,
              fraction: shareDone(p),
            };
            live.eta = Number.isFinite(p.etaSeconds) ? Math.ceil(p.etaSeconds) : live.eta;
            tell();
          },
          stopped,
        );
      }
      if (live.download) {
        // the model is here: the job waits for a place again, before the queued jobs
        delete live.download;
        live.phase = "queued";
        tell();
        await this.takeSlot(id, stopped);
      }
      // "decoding" once the model is there and the job has its place: until then it shows "queued" or "downloading_model"
      live.phase = "decoding";
      const transcript = await this.options.transcriber.run(
        {
          label: id,
          input: row.inputPath,
          displayName: row.fileName,
          workDir: this.workDir(id),
          // a fleet job is not resumed (its scheduler request ends with the agent): nothing to keep
          resumable: !row.options.fleet,
          // the first step this run keeps shows the job is moving: its count of runs without one starts again
          onCheckpoint: () => {
            if (advanced) return;
            advanced = true;
            this.guarded(id, "progress", () => this.store.advanced(id));
          },
          model: row.options.model,
          // Whisper's own translate task goes into English only; other targets translate afterwards.
          translate: row.options.translate && (row.options.targetLanguage ?? "en") === "en",
          ...(row.options.language ? { language: row.options.language } : {}),
          ...(row.options.speakerDiarization
            ? {
                diarization: {
                  ...(row.options.minSpeakers !== undefined ? { minSpeakers: row.options.minSpeakers } : {}),
                  ...(row.options.maxSpeakers !== undefined ? { maxSpeakers: row.options.maxSpeakers } : {}),
                },
              }
            : {}),
          ...(row.options.translate && row.options.targetLanguage && row.options.targetLanguage !== "en" ? { translateTo: row.options.targetLanguage } : {}),
          ...(row.options.decoding ? { decoding: row.options.decoding } : {}),
          ...(row.options.vad ? { vad: row.options.vad } : {}),
        },
        ({ phase, progress, etaSeconds }) => {
          live.phase = phase;
          live.progress = Math.max(live.progress, progress);
          live.eta = etaSeconds;
          tell();
        },
        stopped,
        (segments) => {
          for (const segment of segments) {
            live.segments.push(segment);
            this.emit(id, { type: "segment", segment });
          }
        },
      );
      live.phase = "writing";
      tell();
      const resultPath = join(this.options.dataDir, "results", `${id}.json`);
      await mkdir(dirname(resultPath), { recursive: true });
      await writeFile(`${resultPath}.partial`, JSON.stringify(transcript));
      await rename(`${resultPath}.partial`, resultPath);
      this.store.complete(id, resultPath);
      this.options.onFinished?.("completed", transcript.duration, (Date.now() - started) / 1000);
      await this.removeInput(id, row.inputPath);
      await rm(this.workDir(id), { recursive: true, force: true });
      logger.info({ job: id, file: row.fileName, segments: transcript.segments.length }, "transcription job completed");
    } catch (err) {
      await this.settleFailure(row, live, err).catch((writeErr: unknown) => {
        logger.error({ job: id, err: writeErr, failure: err instanceof Error ? err.message : String(err) }, "transcription job ended but its outcome could not be recorded");
      });
    } finally {
      this.live.delete(id);
      this.ended(id);
    }
  }

  /**
   * Records why a job stopped: interrupted by shutdown (it resumes at the next start from its kept
   * steps, and the run does not count against it), cancelled, or failed. A failure says whose fault
   * it was: the input's ("bad input: …") or the node's ("engine fault: …").
   */
  private async settleFailure(row: JobRow, live: Live, err: unknown): Promise<void> {
    const { logger } = this.options;
    const id = row.id;
    // a cancel first: one that races a drain must not come back at the next start
    if (err instanceof JobAbortedError && this.running.get(id)?.cancel.signal.aborted) {
      this.store.cancel(id);
      await this.removeInput(id, row.inputPath);
      await rm(this.workDir(id), { recursive: true, force: true });
      return;
    }
    if (err instanceof JobAbortedError && this.closed) {
      this.guarded(id, "progress", () => {
        this.store.progress(id, live.progress, live.eta);
        this.store.yielded(id);
      });
      logger.info({ job: id, phase: live.phase }, "transcription job interrupted by shutdown; it resumes at the next start");
      return;
    }
    // An unexpected error's text may name paths on this machine: it goes to the log, not to the client.
    const message =
      err instanceof AudioError
        ? `bad input: ${err.message}`
        : `engine fault: ${err instanceof EngineError ? err.message : "the transcription failed on this node (an internal error, logged under this job id); the file may be fine, submit it again"}`;
    if (err instanceof AudioError) this.audioFaults.add(id);
    else logger.error({ job: id, err }, "transcription job failed");
    this.options.onFinished?.("error");
    await this.removeInput(id, row.inputPath);
    await rm(this.workDir(id), { recursive: true, force: true });
    this.store.fail(id, message);
  }

  /** The folder a job's run keeps its decoded audio and finished steps in. */
  private workDir(id: string): string {
    return join(this.options.dataDir, "work", id);
  }

  /** A store write whose failure must not end the job's run (it is logged). */
  private guarded(id: string, what: string, write: () => void): void {
    try {
      write();
    } catch (err) {
      this.options.logger.error({ job: id, err }, `could not record the job's ${what}`);
    }
  }
}

/**
 * Transcription jobs: accepted uploads wait in a bounded FIFO queue and run a configurable
 * number at a time through the Transcriber. Live progress is kept in memory and written to the
 * store at most once a second; results are written to disk (atomically) before the job is
 * marked completed. At start, jobs a previous run left in `processing` are resumed from their
 * kept upload, or ended as `error` saying why.
 */
import { randomUUID } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { NotFoundError, ServiceUnavailableError, KilnError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { WhisperModelName } from "../../models/whisper.js";
import { AudioError, EngineError, JobAbortedError } from "../asr/errors.js";
import type { Transcriber } from "../asr/pipeline.js";
import type { Transcript } from "../asr/transcript.js";
import { JobStore, type JobOptions, type JobStatus } from "./store.js";

/** Attempts (first run plus resumes after restarts) before an interrupted job is given up. */
const MAX_ATTEMPTS = 3;
const PERSIST_EVERY_MS = 1000;

export interface JobServiceOptions {
  /** Folder for the job database, uploads and results. */
  dataDir: string;
  transcriber: Transcriber;
  /** Jobs transcribing at once. */
  concurrency: number;
  /** Accepted jobs that may wait for a turn (more is a 503). */
  maxQueued: number;
  /** Told of every job that ends (metrics). */
  onFinished?: (outcome: "completed" | "error", audioSeconds?: number, wallSeconds?: number) => void;
  logger: Logger;
}

/** `GET /api/status/{id}`. */
export interface JobView {
  job_id: string;
  status: JobStatus;
  progress: number;
  estimated_time_remaining: number;
  result: Transcript | null;
  error?: string;
  file_name: string;
}

/** A file already streamed to disk, waiting to become a job. */
export interface StagedUpload {
  id: string;
  path: string;
  fileName: string;
}

interface Live {
  progress: number;
  eta: number;
  persistedAt: number;
}

export class JobService {
  private readonly store: JobStore;
  private readonly queue: string[] = [];
  private readonly live = new Map<string, Live>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly abort = new AbortController();
  private closed = false;

  constructor(private readonly options: JobServiceOptions) {
    this.store = new JobStore(join(options.dataDir, "jobs.db"));
  }

  get uploadsDir(): string {
    return join(this.options.dataDir, "uploads");
  }

  /** Jobs transcribing now and jobs waiting for a turn. */
  counts(): { running: number; queued: number } {
    return { running: this.running.size, queued: this.queue.length };
  }

  /** A fresh job id and the folder its upload goes to. */
  async stage(fileName: string): Promise<StagedUpload> {
    const id = randomUUID();
    const dir = join(this.uploadsDir, id);
    await mkdir(dir, { recursive: true });
    return { id, path: join(dir, "input"), fileName };
  }

  /** Removes staged uploads that did not become jobs (a rejected request). */
  async discard(uploads: readonly StagedUpload[]): Promise<void> {
    await Promise.all(uploads.map((u) => rm(dirname(u.path), { recursive: true, force: true })));
  }

  /** Throws a 503 unless `count` more jobs fit in the queue. */
  ensureRoom(count: number): void {
    const waiting = this.queue.length + Math.max(0, this.running.size + count - this.options.concurrency);
    if (this.closed || waiting > this.options.maxQueued) {
      throw new ServiceUnavailableError("queue_full", `audio: the transcription queue is full (${this.options.maxQueued} waiting); try again later`);
    }
  }

  /** Turns staged uploads into queued jobs. */
  submit(uploads: readonly StagedUpload[], options: JobOptions): JobView[] {
    this.ensureRoom(uploads.length);
    return uploads.map((u) => {
      this.store.insert({ id: u.id, fileName: u.fileName, inputPath: u.path, options, eta: 0 });
      this.enqueue(u.id);
      return this.view(u.id)!;
    });
  }

  /** Resumes or ends the jobs a previous run left in `processing`. */
  async recover(): Promise<void> {
    for (const job of this.store.processing()) {
      const kept = await stat(job.inputPath).then((s) => s.isFile(), () => false);
      if (!kept) {
        this.store.fail(job.id, "the agent restarted while this job was processing and its upload is gone; submit the file again");
      } else if (job.attempts >= MAX_ATTEMPTS) {
        this.store.fail(job.id, `the agent stopped ${job.attempts} times while this job was processing; giving up`);
        await rm(dirname(job.inputPath), { recursive: true, force: true });
      } else {
        this.store.retry(job.id);
        this.live.set(job.id, { progress: job.progress, eta: job.eta, persistedAt: 0 });
        this.enqueue(job.id);
        this.options.logger.info({ job: job.id, attempt: job.attempts + 1 }, "resuming interrupted transcription job");
      }
    }
  }

  view(id: string): JobView | undefined {
    const row = this.store.get(id);
    if (!row) return undefined;
    const live = this.live.get(id);
    return {
      job_id: row.id,
      status: row.status,
      progress: row.status === "completed" ? 1 : Math.max(row.progress, live?.progress ?? 0),
      estimated_time_remaining: row.status === "processing" ? (live?.eta ?? row.eta) : 0,
      result: null,
      ...(row.error ? { error: row.error } : {}),
      file_name: row.fileName,
    };
  }

  /** The job's view with its result when completed; 404 for an unknown id. */
  async status(id: string): Promise<JobView> {
    const view = this.view(id);
    if (!view) throw new NotFoundError("job_not_found", `job_id: no job "${id}"`);
    if (view.status === "completed") view.result = await this.result(id);
    return view;
  }

  /** The completed job's transcript; 404 for an unknown id, 409 while it is not completed. */
  async result(id: string): Promise<Transcript> {
    const row = this.store.get(id);
    if (!row) throw new NotFoundError("job_not_found", `job_id: no job "${id}"`);
    if (row.status !== "completed" || !row.resultPath) {
      throw new KilnError(409, "invalid_request_error", row.status === "error" ? "job_failed" : "job_not_completed",
        row.status === "error" ? `job_id: job "${id}" ended in error: ${row.error ?? "unknown"}` : `job_id: job "${id}" is still processing`);
    }
    return JSON.parse(await readFile(row.resultPath, "utf8")) as Transcript;
  }

  /** Stops taking jobs, stops running ones between chunks (they resume at the next start). */
  async close(): Promise<void> {
    this.closed = true;
    this.queue.length = 0;
    this.abort.abort();
    await Promise.allSettled([...this.running.values()]);
    this.store.close();
  }

  private enqueue(id: string): void {
    this.queue.push(id);
    this.pump();
  }

  private pump(): void {
    while (!this.closed && this.running.size < this.options.concurrency && this.queue.length) {
      const id = this.queue.shift()!;
      const run = this.execute(id).finally(() => {
        this.running.delete(id);
        this.pump();
      });
      this.running.set(id, run);
    }
  }

  private async execute(id: string): Promise<void> {
    const row = this.store.get(id);
    if (!row) return;
    const { logger } = this.options;
    const started = Date.now();
    const live = this.live.get(id) ?? { progress: 0, eta: 0, persistedAt: 0 };
    this.live.set(id, live);
    try {
      const transcript = await this.options.transcriber.run({
        input: row.inputPath,
        displayName: row.fileName,
        workDir: join(this.options.dataDir, "work", id),
        model: row.options.model as WhisperModelName,
        // Whisper's own translate task goes into English only; other targets translate afterwards.
        translate: row.options.translate && (row.options.targetLanguage ?? "en") === "en",
        ...(row.options.language ? { language: row.options.language } : {}),
        ...(row.options.speakerDiarization ? { diarization: {
          ...(row.options.minSpeakers !== undefined ? { minSpeakers: row.options.minSpeakers } : {}),
          ...(row.options.maxSpeakers !== undefined ? { maxSpeakers: row.options.maxSpeakers } : {}),
        } } : {}),
        ...(row.options.translate && row.options.targetLanguage && row.options.targetLanguage !== "en" ? { translateTo: row.options.targetLanguage } : {}),
      }, ({ progress, etaSeconds }) => {
        live.progress = Math.max(live.progress, progress);
        live.eta = etaSeconds;
        if (Date.now() - live.persistedAt >= PERSIST_EVERY_MS) {
          live.persistedAt = Date.now();
          this.store.progress(id, live.progress, live.eta);
        }
      }, this.abort.signal);
      const resultPath = join(this.options.dataDir, "results", `${id}.json`);
      await mkdir(dirname(resultPath), { recursive: true });
      await writeFile(`${resultPath}.partial`, JSON.stringify(transcript));
      await rename(`${resultPath}.partial`, resultPath);
      this.store.complete(id, resultPath);
      this.options.onFinished?.("completed", transcript.duration, (Date.now() - started) / 1000);
      await rm(dirname(row.inputPath), { recursive: true, force: true });
      logger.info({ job: id, file: row.fileName, segments: transcript.segments.length }, "transcription job completed");
    } catch (err) {
      if (err instanceof JobAbortedError && this.closed) {
        this.store.progress(id, live.progress, live.eta);
        logger.info({ job: id }, "transcription job interrupted by shutdown; it resumes at the next start");
        return;
      }
      const message = err instanceof AudioError || err instanceof EngineError ? err.message : `transcription failed: ${err instanceof Error ? err.message : String(err)}`;
      if (!(err instanceof AudioError)) logger.error({ job: id, err }, "transcription job failed");
      this.store.fail(id, message);
      this.options.onFinished?.("error");
      await rm(dirname(row.inputPath), { recursive: true, force: true });
    } finally {
      this.live.delete(id);
    }
  }
}

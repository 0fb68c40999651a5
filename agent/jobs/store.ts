/**
 * The job store: one SQLite row per transcription job (better-sqlite3, in the agent's data
 * folder). Results themselves live as JSON files beside it; the row points at them. A job's
 * handle (the secret its submitter reads it with) is kept only as its SHA-256.
 */
import { openDatabase, type Db } from "../../core/sqlite.js";
import type { JobOptions } from "../../speech/options.js";

export type { JobOptions };

export type JobStatus = "processing" | "completed" | "error" | "cancelled";

export interface JobRow {
  id: string;
  status: JobStatus;
  progress: number;
  eta: number;
  error: string | null;
  fileName: string;
  inputPath: string;
  options: JobOptions;
  resultPath: string | null;
  /** Runs in a row that the agent died in before the job finished a step, a run in progress included. */
  attempts: number;
  /** SHA-256 (hex) of the job's handle; null for jobs from before handles existed (token only). */
  handleHash: string | null;
  createdAt: number;
  updatedAt: number;
  /** When the job ended (completed, error, cancelled); null while processing. */
  finishedAt: number | null;
}

const MIGRATIONS = [
  `CREATE TABLE jobs (
     id TEXT PRIMARY KEY,
     status TEXT NOT NULL CHECK (status IN ('processing', 'completed', 'error')),
     progress REAL NOT NULL DEFAULT 0,
     eta INTEGER NOT NULL DEFAULT 0,
     error TEXT,
     file_name TEXT NOT NULL,
     input_path TEXT NOT NULL,
     options TEXT NOT NULL,
     result_path TEXT,
     attempts INTEGER NOT NULL DEFAULT 1,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   );
   CREATE INDEX jobs_status ON jobs(status);`,
  // Handles, cancellation and retention: SQLite cannot widen a CHECK in place, so the table is rebuilt.
  `CREATE TABLE jobs_v2 (
     id TEXT PRIMARY KEY,
     status TEXT NOT NULL CHECK (status IN ('processing', 'completed', 'error', 'cancelled')),
     progress REAL NOT NULL DEFAULT 0,
     eta INTEGER NOT NULL DEFAULT 0,
     error TEXT,
     file_name TEXT NOT NULL,
     input_path TEXT NOT NULL,
     options TEXT NOT NULL,
     result_path TEXT,
     attempts INTEGER NOT NULL DEFAULT 1,
     handle_hash TEXT,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     finished_at INTEGER
   );
   INSERT INTO jobs_v2 (id, status, progress, eta, error, file_name, input_path, options, result_path, attempts, created_at, updated_at, finished_at)
     SELECT id, status, progress, eta, error, file_name, input_path, options, result_path, attempts, created_at, updated_at,
            CASE WHEN status = 'processing' THEN NULL ELSE updated_at END FROM jobs;
   DROP TABLE jobs;
   ALTER TABLE jobs_v2 RENAME TO jobs;
   CREATE INDEX jobs_status ON jobs(status);
   CREATE INDEX jobs_created ON jobs(created_at, id);
   CREATE INDEX jobs_finished ON jobs(finished_at) WHERE finished_at IS NOT NULL;`,
];

interface RawRow {
  id: string;
  status: JobStatus;
  progress: number;
  eta: number;
  error: string | null;
  file_name: string;
  input_path: string;
  options: string;
  result_path: string | null;
  attempts: number;
  handle_hash: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

const fromRaw = (r: RawRow): JobRow => ({
  id: r.id,
  status: r.status,
  progress: r.progress,
  eta: r.eta,
  error: r.error,
  fileName: r.file_name,
  inputPath: r.input_path,
  options: JSON.parse(r.options) as JobOptions,
  resultPath: r.result_path,
  attempts: r.attempts,
  handleHash: r.handle_hash,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  finishedAt: r.finished_at,
});

/** One page of `list`, newest first. */
export interface JobPage {
  jobs: JobRow[];
  hasMore: boolean;
}

export class JobStore {
  private readonly db: Db;

  constructor(path: string) {
    this.db = openDatabase(path, MIGRATIONS);
  }

  insert(job: { id: string; fileName: string; inputPath: string; options: JobOptions; eta: number; handleHash: string }): void {
    const now = Date.now();
    this.db
      .prepare(
        `INSERT INTO jobs (id, status, progress, eta, file_name, input_path, options, handle_hash, attempts, created_at, updated_at)
                     VALUES (?, 'processing', 0, ?, ?, ?, ?, ?, 0, ?, ?)`,
      )
      .run(job.id, job.eta, job.fileName, job.inputPath, JSON.stringify(job.options), job.handleHash, now, now);
  }

  get(id: string): JobRow | undefined {
    const raw = this.db.prepare("SELECT * FROM jobs WHERE id = ?").get(id) as RawRow | undefined;
    return raw && fromRaw(raw);
  }

  /** Jobs left in `processing`, oldest first (after a restart: the interrupted ones). */
  processing(): JobRow[] {
    return (this.db.prepare("SELECT * FROM jobs WHERE status = 'processing' ORDER BY created_at").all() as RawRow[]).map(fromRaw);
  }

  /** Up to `limit` jobs, newest first, starting after the job `after` (a cursor from the previous page). */
  list(limit: number, after?: JobRow): JobPage {
    const rows = (
      after
        ? this.db.prepare("SELECT * FROM jobs WHERE (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?").all(after.createdAt, after.id, limit + 1)
        : this.db.prepare("SELECT * FROM jobs ORDER BY created_at DESC, id DESC LIMIT ?").all(limit + 1)
    ) as RawRow[];
    return { jobs: rows.slice(0, limit).map(fromRaw), hasMore: rows.length > limit };
  }

  /** Finished jobs that ended before `before`, and past the newest `keep` finished ones. */
  expired(before: number, keep: number): JobRow[] {
    return (
      this.db
        .prepare(
          `SELECT * FROM jobs WHERE finished_at IS NOT NULL AND (finished_at < ? OR id NOT IN (
                               SELECT id FROM jobs WHERE finished_at IS NOT NULL ORDER BY finished_at DESC, id DESC LIMIT ?))`,
        )
        .all(before, keep) as RawRow[]
    ).map(fromRaw);
  }

  /** Every job id, for finding files no row owns. */
  ids(): Set<string> {
    return new Set(this.db.prepare("SELECT id FROM jobs").pluck().all() as string[]);
  }

  progress(id: string, progress: number, eta: number): void {
    this.db.prepare("UPDATE jobs SET progress = MAX(progress, ?), eta = ?, updated_at = ? WHERE id = ? AND status = 'processing'").run(progress, eta, Date.now(), id);
  }

  /** A run of the job begins: counted until it finishes a step (`advanced`) or is stopped by a drain (`yielded`). */
  begun(id: string): void {
    this.db.prepare("UPDATE jobs SET attempts = attempts + 1, updated_at = ? WHERE id = ?").run(Date.now(), id);
  }

  /** The job finished a step: no run so far has died without one. */
  advanced(id: string): void {
    this.db.prepare("UPDATE jobs SET attempts = 0 WHERE id = ? AND attempts > 0").run(id);
  }

  /** The job's run was stopped by a drain, not by a fault: it does not count. */
  yielded(id: string): void {
    this.db.prepare("UPDATE jobs SET attempts = MAX(0, attempts - 1) WHERE id = ?").run(id);
  }

  complete(id: string, resultPath: string): void {
    const now = Date.now();
    this.db.prepare("UPDATE jobs SET status = 'completed', progress = 1, eta = 0, result_path = ?, updated_at = ?, finished_at = ? WHERE id = ?").run(resultPath, now, now, id);
  }

  fail(id: string, message: string): void {
    const now = Date.now();
    this.db.prepare("UPDATE jobs SET status = 'error', eta = 0, error = ?, updated_at = ?, finished_at = ? WHERE id = ?").run(message, now, now, id);
  }

  cancel(id: string): void {
    const now = Date.now();
    this.db.prepare("UPDATE jobs SET status = 'cancelled', eta = 0, updated_at = ?, finished_at = ? WHERE id = ? AND status = 'processing'").run(now, now, id);
  }

  delete(id: string): void {
    this.db.prepare("DELETE FROM jobs WHERE id = ?").run(id);
  }

  /** Runs `fn` in one transaction (all its writes or none). */
  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }

  close(): void {
    this.db.close();
  }
}

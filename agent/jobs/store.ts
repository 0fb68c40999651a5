/**
 * The job store: one SQLite row per transcription job (better-sqlite3, in the agent's data
 * folder). Results themselves live as JSON files beside it; the row points at them.
 */
import { openDatabase, type Db } from "../../core/sqlite.js";

export type JobStatus = "processing" | "completed" | "error";

/** What the user asked for, as validated at upload. */
export interface JobOptions {
  model: string;
  language?: string;
  translate: boolean;
  targetLanguage?: string;
  speakerDiarization: boolean;
  minSpeakers?: number;
  maxSpeakers?: number;
}

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
  attempts: number;
  createdAt: number;
  updatedAt: number;
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
];

interface RawRow {
  id: string; status: JobStatus; progress: number; eta: number; error: string | null; file_name: string;
  input_path: string; options: string; result_path: string | null; attempts: number; created_at: number; updated_at: number;
}

const fromRaw = (r: RawRow): JobRow => ({
  id: r.id, status: r.status, progress: r.progress, eta: r.eta, error: r.error, fileName: r.file_name,
  inputPath: r.input_path, options: JSON.parse(r.options) as JobOptions, resultPath: r.result_path,
  attempts: r.attempts, createdAt: r.created_at, updatedAt: r.updated_at,
});

export class JobStore {
  private readonly db: Db;

  constructor(path: string) {
    this.db = openDatabase(path, MIGRATIONS);
  }

  insert(job: { id: string; fileName: string; inputPath: string; options: JobOptions; eta: number }): void {
    const now = Date.now();
    this.db.prepare(`INSERT INTO jobs (id, status, progress, eta, file_name, input_path, options, created_at, updated_at)
                     VALUES (?, 'processing', 0, ?, ?, ?, ?, ?, ?)`)
      .run(job.id, job.eta, job.fileName, job.inputPath, JSON.stringify(job.options), now, now);
  }

  get(id: string): JobRow | undefined {
    const raw = this.db.prepare("SELECT * FROM jobs WHERE id = ?").get(id) as RawRow | undefined;
    return raw && fromRaw(raw);
  }

  /** Jobs left in `processing`, oldest first (after a restart: the interrupted ones). */
  processing(): JobRow[] {
    return (this.db.prepare("SELECT * FROM jobs WHERE status = 'processing' ORDER BY created_at").all() as RawRow[]).map(fromRaw);
  }

  progress(id: string, progress: number, eta: number): void {
    this.db.prepare("UPDATE jobs SET progress = MAX(progress, ?), eta = ?, updated_at = ? WHERE id = ? AND status = 'processing'").run(progress, eta, Date.now(), id);
  }

  retry(id: string): void {
    this.db.prepare("UPDATE jobs SET attempts = attempts + 1, updated_at = ? WHERE id = ?").run(Date.now(), id);
  }

  complete(id: string, resultPath: string): void {
    this.db.prepare("UPDATE jobs SET status = 'completed', progress = 1, eta = 0, result_path = ?, updated_at = ? WHERE id = ?").run(resultPath, Date.now(), id);
  }

  fail(id: string, message: string): void {
    this.db.prepare("UPDATE jobs SET status = 'error', eta = 0, error = ?, updated_at = ? WHERE id = ?").run(message, Date.now(), id);
  }

  close(): void {
    this.db.close();
  }
}

/**
 * The usage ledger: one row per answered request (a completion, embeddings, a transcription) with
 * its account, key, model and what it used (prompt and completion tokens, audio seconds).
 *
 * Rows are buffered in memory and written together, in one transaction, every `flushMs` (default
 * 1 s) and at close: a scheduler that crashes loses at most the last interval's rows. A report reads
 * the buffer's rows too (they are flushed first), so a client sees its own requests at once.
 */
import type { Logger } from "../../core/log.js";
import type { Db } from "../store/index.js";

export type UsageKind = "chat" | "completion" | "embedding" | "transcription";

export interface UsageRow {
  account: string;
  keyId: string;
  model: string;
  kind: UsageKind;
  promptTokens: number;
  completionTokens: number;
  /** Seconds of audio transcribed (transcriptions only). */
  audioSeconds: number;
  /** The HTTP request id (x-request-id). */
  requestId: string;
  /** When the request was answered, Unix ms. Default: now. */
  at?: number;
}

/** Who a request's usage belongs to, and what kind it is: a row less what was used. */
export type UsageOwner = Omit<UsageRow, "promptTokens" | "completionTokens" | "audioSeconds" | "at">;

/** One day and model of an account's usage (`GET /v1/usage`). */
export interface UsageDay {
  /** UTC, `YYYY-MM-DD`. */
  date: string;
  model: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  audio_seconds: number;
}

export interface UsageLedgerOptions {
  /** How often buffered rows are written, in ms. Default 1000. */
  flushMs?: number;
  /** Rows buffered at most; past it they are written at once. Default 10 000. */
  maxBuffered?: number;
  logger: Logger;
}

export class UsageLedger {
  private buffer: Required<UsageRow>[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly insert;
  private readonly maxBuffered: number;
  private readonly listeners: ((row: Required<UsageRow>) => void)[] = [];

  constructor(private readonly db: Db, private readonly options: UsageLedgerOptions) {
    this.insert = db.prepare(`INSERT INTO usage (at, day, account, key_id, model, kind, prompt_tokens, completion_tokens, audio_seconds, request_id)
      VALUES (@at, @day, @account, @keyId, @model, @kind, @promptTokens, @completionTokens, @audioSeconds, @requestId)`);
    this.maxBuffered = options.maxBuffered ?? 10_000;
    this.timer = setInterval(() => this.flush(), options.flushMs ?? 1000);
    this.timer.unref();
  }

  /** Adds a row to the buffer (written within `flushMs`) and tells the listeners (`onRecord`). */
  record(row: UsageRow): void {
    const full = { ...row, at: row.at ?? Date.now() };
    this.buffer.push(full);
    for (const listener of this.listeners) {
      try {
        listener(full);
      } catch (err) {
        this.options.logger.error({ err }, "a usage listener failed"); // the request it came from is answered all the same
      }
    }
    if (this.buffer.length >= this.maxBuffered) this.flush();
  }

  /** Calls `listener` with every row recorded from now on (the token quotas count them). */
  onRecord(listener: (row: Required<UsageRow>) => void): void {
    this.listeners.push(listener);
  }

  /** Tokens (prompt and completion) `account` used on `day` (UTC `YYYY-MM-DD`), buffered rows included. */
  tokensOn(account: string, day: string): number {
    this.flush();
    const row = this.db.prepare("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) AS n FROM usage WHERE account = ? AND day = ?").get(account, day) as { n: number };
    return row.n;
  }

  /** Writes the buffered rows now, in one transaction; a failure is logged and the rows kept for the next try. */
  flush(): void {
    if (this.buffer.length === 0 || !this.db.open) return;
    const rows = this.buffer;
    this.buffer = [];
    try {
      this.db.transaction(() => {
        for (const r of rows) this.insert.run({ ...r, day: dayOf(r.at) });
      })();
    } catch (err) {
      this.options.logger.error({ err, rows: rows.length }, "could not write usage rows; keeping them for the next flush");
      this.buffer = rows.concat(this.buffer).slice(-this.maxBuffered * 10);
    }
  }

  /** `account`'s usage from `from` to `to` (UTC days, inclusive), by day and model, oldest first. */
  report(account: string, from: string, to: string): UsageDay[] {
    this.flush();
    const rows = this.db.prepare(`SELECT day AS date, model, COUNT(*) AS requests, SUM(prompt_tokens) AS prompt_tokens,
        SUM(completion_tokens) AS completion_tokens, SUM(audio_seconds) AS audio_seconds
      FROM usage WHERE account = ? AND day >= ? AND day <= ? GROUP BY day, model ORDER BY day, model`).all(account, from, to) as Omit<UsageDay, "total_tokens">[];
    return rows.map((r) => ({ ...r, total_tokens: r.prompt_tokens + r.completion_tokens, audio_seconds: Math.round(r.audio_seconds * 1000) / 1000 }));
  }

  /** Stops the timer and writes what is buffered. */
  close(): void {
    clearInterval(this.timer);
    this.flush();
  }
}

/** The UTC day of a Unix-ms time, `YYYY-MM-DD`. */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

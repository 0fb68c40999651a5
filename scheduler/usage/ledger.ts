/**
 * The usage ledger: one row per answered request (a completion, embeddings, a transcription) with
 * its account, key, model and what it used (prompt and completion tokens, audio seconds).
 *
 * Rows are buffered in memory and written together, in one transaction, every `flushMs` (default
 * 1 s) and at close: a scheduler that crashes loses at most the last interval's rows. A report reads
 * the buffer's rows too (they are flushed first), so a client sees its own requests at once. With a
 * shared database (PostgreSQL) a report adds up the rows of every scheduler.
 */
import type { Logger } from "../../core/log.js";
import type { SqlValue, Store } from "../store/index.js";

/**
 * Rows per INSERT statement, largest first: a batch is written in statements of these sizes only
 * (10 values a row, far below both engines' limits), so three statement texts serve every batch.
 */
const STATEMENT_ROWS = [100, 10, 1];
const COLUMNS = "(at, day, account, key_id, model, kind, prompt_tokens, completion_tokens, audio_seconds, request_id)";

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
  private readonly maxBuffered: number;
  private readonly listeners: ((row: Required<UsageRow>) => void)[] = [];
  /** The write under way, if any. */
  private writing: Promise<void> | undefined;
  /** The write that follows it, shared by every flush asked for meanwhile. */
  private next: Promise<void> | undefined;

  constructor(
    private readonly store: Store,
    private readonly options: UsageLedgerOptions,
  ) {
    this.maxBuffered = options.maxBuffered ?? 10_000;
    this.timer = setInterval(() => void this.flush(), options.flushMs ?? 1000);
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
    if (this.buffer.length >= this.maxBuffered) void this.flush();
  }

  /** Calls `listener` with every row recorded from now on (the token quotas count them). */
  onRecord(listener: (row: Required<UsageRow>) => void): void {
    this.listeners.push(listener);
  }

  /** Tokens (prompt and completion) `account` used on `day` (UTC `YYYY-MM-DD`), buffered rows included. */
  async tokensOn(account: string, day: string): Promise<number> {
    await this.flush();
    const row = await this.store.get<{ n: number }>("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) AS n FROM usage WHERE account = ? AND day = ?", [account, day]);
    return row?.n ?? 0;
  }

  /** Seconds of audio `account` had transcribed on `day` (UTC `YYYY-MM-DD`), buffered rows included, each rounded up to a whole second (as the audio quota counts them). */
  async audioSecondsOn(account: string, day: string): Promise<number> {
    await this.flush();
    const rows = await this.store.all<{ s: number }>("SELECT audio_seconds AS s FROM usage WHERE account = ? AND day = ? AND audio_seconds > 0", [account, day]);
    return rows.reduce((n, r) => n + Math.ceil(Number(r.s)), 0);
  }

  /**
   * Writes the buffered rows, in one transaction, after any write under way; resolves once they are
   * written (or the write failed: logged, and the rows kept for the next try). Flushes asked for
   * while a write runs share the one write after it: at most two are ever pending, whatever the
   * database's state.
   */
  flush(): Promise<void> {
    if (!this.writing) {
      this.writing = this.write().finally(() => {
        this.writing = undefined;
      });
      return this.writing;
    }
    this.next ??= this.writing.then(() => {
      this.next = undefined;
      return this.flush();
    });
    return this.next;
  }

  private async write(): Promise<void> {
    if (this.buffer.length === 0 || !this.store.open) return;
    const rows = this.buffer;
    this.buffer = [];
    try {
      await this.store.transaction(async (tx) => {
        for (let i = 0; i < rows.length;) {
          const size = STATEMENT_ROWS.find((n) => n <= rows.length - i)!;
          const chunk = rows.slice(i, (i += size));
          const values: SqlValue[] = chunk.flatMap((r) => [
            r.at,
            dayOf(r.at),
            r.account,
            r.keyId,
            r.model,
            r.kind,
            r.promptTokens,
            r.completionTokens,
            r.audioSeconds,
            r.requestId,
          ]);
          await tx.run(`INSERT INTO usage ${COLUMNS} VALUES ${chunk.map(() => "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ")}`, values);
        }
      });
    } catch (err) {
      const kept = rows.concat(this.buffer);
      const limit = this.maxBuffered * 10;
      this.options.logger.error(
        { err, rows: kept.length, dropped: Math.max(0, kept.length - limit) },
        "could not write usage rows; keeping them for the next flush (the oldest past 10 × maxBuffered are dropped)",
      );
      this.buffer = kept.slice(-limit);
    }
  }

  /** `account`'s usage from `from` to `to` (UTC days, inclusive), by day and model, oldest first. */
  async report(account: string, from: string, to: string): Promise<UsageDay[]> {
    await this.flush();
    const rows = await this.store.all<Omit<UsageDay, "total_tokens">>(
      `SELECT day AS date, model, COUNT(*) AS requests, SUM(prompt_tokens) AS prompt_tokens,
        SUM(completion_tokens) AS completion_tokens, SUM(audio_seconds) AS audio_seconds
      FROM usage WHERE account = ? AND day >= ? AND day <= ? GROUP BY day, model ORDER BY day, model`,
      [account, from, to],
    );
    return rows.map((r) => ({ ...r, total_tokens: r.prompt_tokens + r.completion_tokens, audio_seconds: Math.round(r.audio_seconds * 1000) / 1000 }));
  }

  /** Stops the timer and writes what is buffered. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

/** The UTC day of a Unix-ms time, `YYYY-MM-DD`. */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

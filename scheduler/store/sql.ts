/**
 * The one interface the scheduler's services use to reach their database, whichever engine holds
 * it: SQLite (better-sqlite3, the embedded default) or PostgreSQL (`pg`). Statements are written
 * once, in the SQL both engines accept, with `?` placeholders; each engine adapts them.
 */

/** A value a statement may bind. */
export type SqlValue = string | number | bigint | Buffer | null;

/** The engine a store runs on. */
export type Dialect = "sqlite" | "postgres";

/** Statements, run in order: what a transaction's body receives, and what a store is. */
export interface SqlRunner {
  /** Every row the query returns. */
  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  /** The first row, or undefined. */
  get<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined>;
  /** Runs a statement; `changes`: the rows it inserted, updated or deleted. */
  run(sql: string, params?: readonly SqlValue[]): Promise<{ changes: number }>;
}

/** The scheduler's database. */
export interface Store extends SqlRunner {
  readonly dialect: Dialect;
  /** Where it is, for logs: a file path, or a URL without its password. */
  readonly location: string;
  /** False once closed (or, for a server, while it cannot be reached): readiness reports it. */
  readonly open: boolean;
  /**
   * Runs `body` in one transaction: committed when it resolves, rolled back when it throws. The
   * runner `body` receives is the only one inside it (SQLite: other statements wait for it).
   * `lock`: transactions naming the same lock run one at a time, across every scheduler sharing
   * the database (a count and the insert it allows, as one step). SQLite's transactions already do.
   */
  transaction<T>(body: (tx: SqlRunner) => Promise<T>, options?: { lock?: string }): Promise<T>;
  /**
   * A number that changes whenever a row of `api_keys` or `accounts` may have changed since it was
   * last taken, by a statement of this store or by another connection (another process), so such a
   * row read while it held a value is still the row while it still does. Only where that costs no
   * round trip: SQLite counts every change (`PRAGMA data_version`); PostgreSQL, its own writes and
   * the notifications of those tables' triggers, and answers undefined while it cannot listen for
   * them. Undefined (or absent): the rows must be read again.
   */
  changeCount?(): number | undefined;
  close(): Promise<void>;
}

/**
 * `?` placeholders as PostgreSQL's `$1`, `$2`…, leaving any `?` inside a quoted string or
 * identifier as it is. Values are always bound, never written into the text.
 */
export function numberedPlaceholders(sql: string): string {
  let n = 0;
  return sql.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"|\?/g, (m) => (m === "?" ? `$${++n}` : m));
}

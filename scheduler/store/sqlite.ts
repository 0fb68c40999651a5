/**
 * The store on SQLite (better-sqlite3): one connection, synchronous underneath. A transaction
 * holds the connection: statements from elsewhere wait until it ends, so none slips into it.
 *
 * A statement that finds no transaction runs at once, in the caller's turn (one promise, no
 * AsyncLocalStorage: on Node 20 that puts a hook on every promise of the process, a cost every
 * request of the gateway would pay). So a statement sent through the store from inside a
 * transaction's body, rather than through the body's runner, is told from one sent from elsewhere
 * only before the body's first await (it is refused at once); after that it waits for the
 * transaction, which waits for it, until `transactionWaitMs` ends the wait with an error and the
 * transaction rolls back.
 */
import type { Statement } from "better-sqlite3";
import { openDatabase, type Db } from "../../core/sqlite.js";
import { oncePerTurn } from "../../core/per-turn.js";
import { migrations } from "./migrations.js";
import type { SqlRunner, SqlValue, Store } from "./sql.js";

/** Prepared statements kept; past it they are prepared again. */
const MAX_STATEMENTS = 512;

/** A statement sent through the store, not the transaction's runner, from inside a transaction's body. */
const INSIDE_TRANSACTION = "a statement inside a transaction must go through the transaction's runner (through the store it waits for the transaction for ever)";

/** How long a statement waits for a transaction to end before failing (default of `transactionWaitMs`). */
export const TRANSACTION_WAIT_MS = 30_000;

/** Options of a SQLite store. */
export interface SqliteStoreOptions {
  /**
   * Milliseconds a statement waits for the transaction holding the connection; past it the
   * statement fails (a transaction's body that sends a statement through the store instead of its
   * runner would otherwise wait for itself for ever). Default `TRANSACTION_WAIT_MS` (30 s): the
   * store's transactions take milliseconds.
   */
  transactionWaitMs?: number;
}

export class SqliteStore implements Store {
  readonly dialect = "sqlite";
  private readonly db: Db;
  /** Settles when the transaction holding the connection ends. */
  private busy: Promise<void> | undefined;
  private readonly direct: SqlRunner;
  private readonly statements = new Map<string, Statement>();
  private readonly transactionWaitMs: number;
  /** `PRAGMA data_version`: changes when another connection commits (this one's commits are counted in `changes`). */
  private readonly dataVersion: Statement;
  private seenDataVersion: unknown;
  /** Statements of this store that may have written, and other connections' commits seen: `changeCount`. */
  private changes = 0;
  /** A transaction's body runs its first turn (before its first await). */
  private inBodyTurn = false;

  constructor(
    readonly location: string,
    options: SqliteStoreOptions = {},
  ) {
    this.transactionWaitMs = options.transactionWaitMs ?? TRANSACTION_WAIT_MS;
    this.db = openDatabase(location, migrations("sqlite"));
    this.dataVersion = this.db.prepare("PRAGMA data_version").pluck();
    this.direct = {
      all: async <T>(sql: string, params: readonly SqlValue[] = []) => this.statement(sql).all(...params) as T[],
      get: async <T>(sql: string, params: readonly SqlValue[] = []) => this.statement(sql).get(...params) as T | undefined,
      run: async (sql: string, params: readonly SqlValue[] = []) => ({ changes: this.statement(sql).run(...params).changes }),
    };
  }

  /** The prepared statement of `sql`, prepared once (the services' statements are a fixed set of texts); one that may write is counted in `changeCount`. */
  private statement(sql: string): Statement {
    let s = this.statements.get(sql);
    if (!s) {
      if (this.statements.size >= MAX_STATEMENTS) this.statements.clear();
      this.statements.set(sql, (s = this.db.prepare(sql)));
    }
    if (!s.readonly) this.changes++;
    return s;
  }

  /**
   * This store's own writes count at once. Another connection's commit is seen from the next turn
   * of the event loop: `PRAGMA data_version` (two lock calls and an `fstat`, about a tenth of a
   * refused request's time on the gateway) is read once per turn, not at every request of a turn.
   */
  changeCount(): number {
    this.readDataVersion();
    return this.changes;
  }

  /** Counts another connection's commit seen since the last read (`changeCount`): once per turn. */
  private readonly readDataVersion = oncePerTurn(() => {
    const version: unknown = this.dataVersion.get();
    if (version !== this.seenDataVersion) {
      this.seenDataVersion = version;
      this.changes++;
    }
  });

  get open(): boolean {
    return this.db.open;
  }

  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    return this.inTurn(() => this.direct.all<T>(sql, params));
  }

  get<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined> {
    return this.inTurn(() => this.direct.get<T>(sql, params));
  }

  run(sql: string, params?: readonly SqlValue[]): Promise<{ changes: number }> {
    return this.inTurn(() => this.direct.run(sql, params));
  }

  /** (A `lock` needs nothing here: BEGIN IMMEDIATE already runs one writing transaction at a time.) */
  async transaction<T>(body: (tx: SqlRunner) => Promise<T>, _options?: { lock?: string }): Promise<T> {
    if (this.inBodyTurn) throw new Error(INSIDE_TRANSACTION);
    while (this.busy) await this.transactionEnd(); // claimed in the same turn it is seen free (as in inTurn)
    let end!: () => void;
    this.busy = new Promise((resolve) => (end = resolve));
    try {
      this.db.exec("BEGIN IMMEDIATE");
      try {
        // a statement sent through the store before the body's first await is refused at once (later ones meet the deadline)
        this.inBodyTurn = true;
        let running: Promise<T>;
        try {
          running = body(this.direct);
        } finally {
          this.inBodyTurn = false;
        }
        const result = await running;
        this.db.exec("COMMIT");
        return result;
      } catch (err) {
        try {
          if (this.db.inTransaction) this.db.exec("ROLLBACK");
        } catch {
          /* the body's error is the one to tell */
        }
        throw err;
      }
    } finally {
      this.changes++; // a rollback changes what was read inside the transaction back
      this.busy = undefined;
      end();
    }
  }

  /**
   * Runs `statement` once no transaction holds the connection, in the same turn that saw it free
   * (an `await` between the check and the statement would let a transaction begin in between). With
   * none, at once: the caller's one promise is the statement's.
   */
  private inTurn<R>(statement: () => Promise<R>): Promise<R> {
    if (this.inBodyTurn) return Promise.reject(new Error(INSIDE_TRANSACTION));
    if (!this.busy) return statement();
    return (async () => {
      while (this.busy) await this.transactionEnd();
      return statement();
    })();
  }

  /** Settles when the transaction holding the connection ends; rejects after `transactionWaitMs`. */
  private transactionEnd(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `a statement waited ${this.transactionWaitMs} ms for a transaction to end (a statement sent through the store from inside a transaction's body, instead of through the transaction's runner, waits for it for ever)`,
            ),
          ),
        this.transactionWaitMs,
      );
    });
    return Promise.race([this.busy, waited]).finally(() => clearTimeout(timer));
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

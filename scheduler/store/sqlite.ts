/**
 * The store on SQLite (better-sqlite3): one connection, synchronous underneath. A transaction
 * holds the connection: statements from elsewhere wait until it ends, so none slips into it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Statement } from "better-sqlite3";
import { openDatabase, type Db } from "../../core/sqlite.js";
import { migrations } from "./migrations.js";
import type { SqlRunner, SqlValue, Store } from "./sql.js";

/** Prepared statements kept; past it they are prepared again. */
const MAX_STATEMENTS = 512;

export class SqliteStore implements Store {
  readonly dialect = "sqlite";
  private readonly db: Db;
  /** Settles when the transaction holding the connection ends. */
  private busy: Promise<void> | undefined;
  private readonly direct: SqlRunner;
  private readonly statements = new Map<string, Statement>();
  /** Set inside a transaction's body: a statement sent there through the store, not the body's runner, would wait for the body for ever. */
  private readonly inTransaction = new AsyncLocalStorage<true>();

  constructor(readonly location: string) {
    this.db = openDatabase(location, migrations("sqlite"));
    this.direct = {
      all: async <T>(sql: string, params: readonly SqlValue[] = []) => this.statement(sql).all(...params) as T[],
      get: async <T>(sql: string, params: readonly SqlValue[] = []) => this.statement(sql).get(...params) as T | undefined,
      run: async (sql: string, params: readonly SqlValue[] = []) => ({ changes: this.statement(sql).run(...params).changes }),
    };
  }

  /** The prepared statement of `sql`, prepared once (the services' statements are a fixed set of texts). */
  private statement(sql: string): Statement {
    let s = this.statements.get(sql);
    if (!s) {
      if (this.statements.size >= MAX_STATEMENTS) this.statements.clear();
      this.statements.set(sql, (s = this.db.prepare(sql)));
    }
    return s;
  }

  get open(): boolean {
    return this.db.open;
  }

  async all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    return this.inTurn(() => this.direct.all<T>(sql, params));
  }

  async get<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined> {
    return this.inTurn(() => this.direct.get<T>(sql, params));
  }

  async run(sql: string, params?: readonly SqlValue[]): Promise<{ changes: number }> {
    return this.inTurn(() => this.direct.run(sql, params));
  }

  /** (A `lock` needs nothing here: BEGIN IMMEDIATE already runs one writing transaction at a time.) */
  async transaction<T>(body: (tx: SqlRunner) => Promise<T>, _options?: { lock?: string }): Promise<T> {
    this.refuseInside();
    while (this.busy) await this.busy; // claimed in the same turn it is seen free (as in inTurn)
    let end!: () => void;
    this.busy = new Promise((resolve) => (end = resolve));
    try {
      this.db.exec("BEGIN IMMEDIATE");
      try {
        const result = await this.inTransaction.run(true, () => body(this.direct));
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
      this.busy = undefined;
      end();
    }
  }

  /**
   * Runs `statement` once no transaction holds the connection, in the same turn that saw it free
   * (an `await` between the check and the statement would let a transaction begin in between).
   */
  private async inTurn<R>(statement: () => R): Promise<Awaited<R>> {
    this.refuseInside();
    while (this.busy) await this.busy;
    return await statement();
  }

  /** Refuses a statement sent through the store from inside a transaction's body. */
  private refuseInside(): void {
    if (this.inTransaction.getStore()) throw new Error("a statement inside a transaction must go through the transaction's runner (it would wait for the transaction for ever)");
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

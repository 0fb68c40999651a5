/**
 * The store on PostgreSQL (`pg`): a pool of connections shared by every request. Migrations run
 * once across every scheduler starting at the same time, under a session advisory lock; the
 * version reached is a row of `kiln_schema`. 64-bit integers and sums come back as JavaScript
 * numbers (Unix ms and token counts stay far below 2^53), bytes as Buffers, as from SQLite.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { ConfigError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { withoutPassword } from "../../core/net.js";
import { KEYS_CHANNEL, migrations } from "./migrations.js";
import { numberedPlaceholders, type SqlRunner, type SqlValue, type Store } from "./sql.js";

/** Any number: the advisory lock every Kiln scheduler takes to migrate ("kiln" in ASCII). */
const MIGRATION_LOCK = 0x6b696c6e;

const INT8 = 20;
const NUMERIC = 1700;

/** Type parsers of this pool only (the `pg` module's defaults are left alone). */
const types = {
  getTypeParser(oid: number, format?: string): (value: string) => unknown {
    if (oid === INT8) return (v: string) => Number(v);
    if (oid === NUMERIC) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as "text");
  },
};

export interface PostgresStoreOptions {
  /** `postgres://[user[:password]@]host[:port]/database[?…]`. */
  url: string;
  /** Connections in the pool. Default 10. */
  poolSize?: number;
  /**
   * How often the connection that listens for key changes is checked by a notification of its own,
   * in ms. Unheard for 3 beats, it is not trusted (keys are read at every request); for 10, it is
   * replaced. Default 1000.
   */
  heartbeatMs?: number;
  logger: Logger;
}

/** `wrote()` is called before and after every `run` (a statement that may write), so that `changeCount` moves across it. */
function runner(client: pg.Pool | pg.PoolClient, observe: <R>(p: Promise<R>) => Promise<R>, wrote: () => void): SqlRunner {
  const query = (sql: string, params: readonly SqlValue[] = []) => observe(client.query(numberedPlaceholders(sql), params as unknown[]));
  return {
    all: async <T>(sql: string, params?: readonly SqlValue[]) => (await query(sql, params)).rows as T[],
    get: async <T>(sql: string, params?: readonly SqlValue[]) => (await query(sql, params)).rows[0] as T | undefined,
    run: async (sql: string, params?: readonly SqlValue[]) => {
      wrote();
      try {
        return { changes: (await query(sql, params)).rowCount ?? 0 };
      } finally {
        wrote();
      }
    },
  };
}

/** An error that says the server or the connection is gone (not one a statement caused). */
function connectionLost(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  // node's socket errors; PostgreSQL's class 08 (connection exception) and 57P01–57P03 (shutdown, cannot connect now)
  return (
    /^(E[A-Z]+|08...|57P0[123])$/.test(e.code ?? "") || /timeout exceeded when trying to connect|Connection terminated|not queryable|terminating connection/i.test(e.message ?? "")
  );
}

/** How often a store that lost its server tries it again, for readiness (ms). */
const RECHECK_MS = 2000;
/** A listener that heard no heartbeat for this many beats is not trusted (rows are read); for LOST_AFTER_BEATS, it is replaced. */
const DEAF_AFTER_BEATS = 3;
const LOST_AFTER_BEATS = 10;

export class PostgresStore implements Store {
  readonly dialect = "postgres";
  readonly location: string;
  private readonly pool: pg.Pool;
  private readonly pooled: SqlRunner;
  private closed = false;
  /** False from a statement that lost its connection until one succeeds again. */
  private reachable = true;
  private recheck: NodeJS.Timeout | undefined;
  /**
   * `changeCount`'s number: this store's writes, and the notifications of KEYS_CHANNEL the listener
   * got (another scheduler's commit, or `kiln keys` in another process).
   */
  private changes = 0;
  /** The connection that LISTENs on KEYS_CHANNEL, while it does; and one still connecting. */
  private listener: pg.Client | undefined;
  private connecting: pg.Client | undefined;
  private relisten: NodeJS.Timeout | undefined;
  /** This store's own channel, which its heartbeat notifies through the pool and its listener hears. */
  private readonly beatChannel = `kiln_beat_${randomBytes(8).toString("hex")}`;
  private beat: NodeJS.Timeout | undefined;
  private get beatMs(): number {
    return this.options.heartbeatMs ?? 1000;
  }
  /** When the listener last heard the heartbeat (performance.now()). */
  private heardAt = 0;
  /** Whether `changeCount` last answered undefined for want of a heartbeat. */
  private deaf = false;
  /** Closes the listener as lost, and tries another. */
  private dropListener: ((why: string) => void) | undefined;

  private constructor(private readonly options: PostgresStoreOptions) {
    this.location = withoutPassword(options.url);
    this.pool = new pg.Pool({ connectionString: options.url, max: options.poolSize ?? 10, types, connectionTimeoutMillis: 10_000 });
    // an idle connection the server drops is an 'error' on the pool: logged, the next query opens another
    this.pool.on("error", (err) => options.logger.warn({ err: err.message }, "postgres: an idle connection failed"));
    this.pooled = runner(
      this.pool,
      (p) => this.observe(p),
      () => this.changes++,
    );
  }

  /** Connects, applies the migrations the database lacks, and returns the store; throws when the server cannot be reached. */
  static async open(options: PostgresStoreOptions): Promise<PostgresStore> {
    const store = new PostgresStore(options);
    try {
      await store.migrate();
      await store.listen();
    } catch (err) {
      await store.close();
      if (err instanceof ConfigError) throw err;
      // pg's messages name neither the server nor the password: say which server could not be used
      throw new ConfigError("--db / KILN_DB", `the PostgreSQL database ${store.location} cannot be used: ${(err as Error).message}`);
    }
    return store;
  }

  /** Open, and its server answered the last statement (readiness: a load balancer stops sending requests while it is gone). */
  get open(): boolean {
    return !this.closed && this.reachable;
  }

  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    return this.pooled.all<T>(sql, params);
  }

  get<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined> {
    return this.pooled.get<T>(sql, params);
  }

  run(sql: string, params?: readonly SqlValue[]): Promise<{ changes: number }> {
    return this.pooled.run(sql, params);
  }

  /**
   * Moves with this store's writes (before and after each) and with every notification of a commit
   * that changed keys or accounts; undefined while no connection listens for those (from a lost
   * listener until a new one listens, when it moves once more for what it may have missed).
   */
  changeCount(): number | undefined {
    if (!this.listener) return undefined;
    // a connection cut without a word (a dead host, a NAT's timeout, a pooler that drops notifications)
    // stops the heartbeat: the rows are read until it is heard again
    if (performance.now() - this.heardAt > DEAF_AFTER_BEATS * this.beatMs) {
      this.deaf = true;
      return undefined;
    }
    if (this.deaf) {
      this.deaf = false;
      this.changes++; // what changed while it heard nothing
    }
    return this.changes;
  }

  async transaction<T>(body: (tx: SqlRunner) => Promise<T>, options: { lock?: string } = {}): Promise<T> {
    return this.withClient(async (client) => {
      await client.query("BEGIN");
      // held until the transaction ends: other schedulers' transactions on the same lock wait here
      if (options.lock !== undefined)
        await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [options.lock]).catch(async (err: unknown) => {
          await client.query("ROLLBACK").catch(() => undefined);
          throw err;
        });
      let result: T;
      let wrote = false;
      try {
        result = await body(
          runner(
            client,
            (p) => this.observe(p),
            () => {
              wrote = true;
              this.changes++;
            },
          ),
        );
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined); // the body's error is the one to tell
        throw err;
      }
      await client.query("COMMIT");
      if (wrote) this.changes++; // a row read between its last statement and the commit is the old one
      return result;
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.recheck);
    clearTimeout(this.relisten);
    clearInterval(this.beat);
    const clients = [this.listener, this.connecting];
    this.listener = this.connecting = undefined;
    await Promise.all([this.pool.end(), ...clients.map((c) => c?.end().catch(() => undefined))]);
  }

  /**
   * Opens a connection of its own that LISTENs on KEYS_CHANNEL, and on this store's heartbeat
   * channel, which the pool notifies every `heartbeatMs`: `changeCount` trusts the listener only
   * while it has heard a beat within DEAF_AFTER_BEATS of them. When the connection fails (at open,
   * or later) or stays deaf for LOST_AFTER_BEATS, `changeCount` answers undefined and a new one is
   * tried every RECHECK_MS.
   */
  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.url, connectionTimeoutMillis: 10_000, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
    this.connecting = client;
    let gone = false;
    const lost = (why: string): void => {
      if (gone) return;
      gone = true;
      if (this.listener === client) this.listener = undefined;
      if (this.connecting === client) this.connecting = undefined;
      void client.end().catch(() => undefined);
      if (this.closed) return;
      this.options.logger.warn({ err: why }, "postgres: the key notifications' connection is lost; keys are read at every request until it is back");
      this.relisten ??= setTimeout(() => {
        this.relisten = undefined;
        void this.listen();
      }, RECHECK_MS).unref();
    };
    client.on("notification", (n) => {
      if (n.channel === this.beatChannel) this.heardAt = performance.now();
      else this.changes++;
    });
    client.on("error", (err) => lost(err.message));
    client.on("end", () => lost("connection ended"));
    try {
      await client.connect();
      await client.query(`LISTEN ${KEYS_CHANNEL}`);
      await client.query(`LISTEN ${this.beatChannel}`);
    } catch (err) {
      lost((err as Error).message);
      return;
    }
    if (this.connecting === client) this.connecting = undefined;
    if (gone || this.closed) return void client.end().catch(() => undefined);
    this.changes++; // what changed while nothing listened
    this.heardAt = performance.now();
    this.listener = client;
    this.dropListener = lost;
    this.beat ??= setInterval(() => {
      if (this.listener && performance.now() - this.heardAt > LOST_AFTER_BEATS * this.beatMs) this.dropListener?.(`no heartbeat heard for ${LOST_AFTER_BEATS} beats`);
      // a read for the pool (it writes no row: `changeCount` does not move for it)
      if (this.listener) void this.pooled.get("SELECT pg_notify(?, '')", [this.beatChannel]).catch(() => undefined);
    }, this.beatMs).unref();
  }

  /**
   * Runs `work` on a connection of its own. While it is checked out, a connection the server drops
   * emits 'error' on it (the pool listens only to idle ones): caught here, or the process would
   * die of it. A connection whose statement failed this way is destroyed, not pooled again.
   */
  private async withClient<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.observe(this.pool.connect());
    let broken: Error | undefined;
    const onError = (err: Error) => {
      broken = err;
      this.lost();
      this.options.logger.warn({ err: err.message }, "postgres: a connection in use failed");
    };
    client.on("error", onError);
    try {
      return await work(client);
    } catch (err) {
      if (connectionLost(err)) broken ??= err as Error;
      throw err;
    } finally {
      client.off("error", onError);
      client.release(broken);
    }
  }

  /** Notes whether the server answered: a lost connection makes the store unready until a statement (or a recheck) succeeds. */
  private async observe<R>(p: Promise<R>): Promise<R> {
    try {
      const result = await p;
      this.reachable = true;
      return result;
    } catch (err) {
      if (connectionLost(err)) this.lost();
      throw err;
    }
  }

  /** The server is gone: unready, and tried again every RECHECK_MS until it answers. */
  private lost(): void {
    if (this.closed) return;
    this.reachable = false;
    this.recheck ??= setTimeout(() => {
      this.recheck = undefined;
      void this.pooled.get("SELECT 1").catch(() => undefined); // success marks it reachable; failure schedules the next
    }, RECHECK_MS).unref();
  }

  /** Applies the migrations not yet applied, each in its own transaction, holding the advisory lock throughout. */
  private async migrate(): Promise<void> {
    await this.withClient(async (client) => {
      await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
      try {
        await client.query("CREATE TABLE IF NOT EXISTS kiln_schema (version INTEGER NOT NULL)");
        const row = (await client.query<{ version: number }>("SELECT version FROM kiln_schema")).rows[0];
        if (!row) await client.query("INSERT INTO kiln_schema (version) VALUES (0)");
        const all = migrations("postgres");
        if ((row?.version ?? 0) > all.length) {
          throw new ConfigError(
            "--db / KILN_DB",
            `the database ${this.location}: schema version ${row!.version} is newer than this Kiln's ${all.length}: a newer Kiln migrated it; run that version`,
          );
        }
        for (let v = row?.version ?? 0; v < all.length; v++) {
          await client.query("BEGIN");
          try {
            await client.query(all[v]!);
            await client.query("UPDATE kiln_schema SET version = $1", [v + 1]);
            await client.query("COMMIT");
          } catch (err) {
            await client.query("ROLLBACK");
            throw err;
          }
        }
      } finally {
        await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]);
      }
    });
  }
}

/**
 * The store's contract, the same on both engines: SQLite in a temporary file and PostgreSQL on a
 * throwaway server (Debian's binaries; skipped visibly where absent).
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../core/log.js";
import { createPostgresDatabase, postgresServerUrl } from "../../test/helpers/db.js";
import { postgresBin, startPostgres, type Postgres } from "../../test/helpers/postgres.js";
import { tempDir } from "../../test/helpers/temp.js";
import { migrations } from "./migrations.js";
import { openStore } from "./index.js";
import { numberedPlaceholders } from "./sql.js";
import { PostgresStore } from "./postgres.js";
import { createServer, connect, type AddressInfo, type Socket } from "node:net";
import { until } from "../../scripts/lib/run.js";
import { randomBytes } from "node:crypto";
import { AccountSecrets, MAX_SECRETS_PER_ACCOUNT } from "../mcp/secrets.js";
import { McpStore } from "../mcp/store.js";

const logger = createLogger("test", "silent");
const PG = postgresBin();
let server: Postgres | undefined;
beforeAll(async () => {
  if (PG) server = await startPostgres(PG);
}, 60_000);
afterAll(() => server?.stop());

const engines: [string, () => string][] = [
  ["SQLite", () => join(tempDir(), "kiln.db")],
  ...(PG ? [["PostgreSQL", () => createPostgresDatabase(postgresServerUrl(server!.port))] as [string, () => string]] : []),
];

describe.each(engines)("the store on %s", (engine, newDb) => {
  const open = (db: string) => openStore(db, { logger });

  it("creates the schema at open and applies nothing twice: a second open of the same database finds its rows", async () => {
    const db = newDb();
    const first = await open(db);
    await first.run("INSERT INTO settings (name, value) VALUES (?, ?)", ["a", "1"]);
    await first.close();
    const second = await open(db);
    try {
      expect(await second.all("SELECT name, value FROM settings")).toEqual([{ name: "a", value: "1" }]);
    } finally {
      await second.close();
    }
  });

  it("gives whole numbers past 2^31, sums and bytes back as numbers and Buffers, as both engines store them", async () => {
    const store = await open(newDb());
    try {
      const at = Date.now(); // Unix ms: past 32 bits
      await store.run("INSERT INTO account_secrets (account, name, nonce, ciphertext, tag, updated_at) VALUES (?, ?, ?, ?, ?, ?)", [
        "a",
        "N",
        Buffer.from([0, 1, 255]),
        Buffer.from("x"),
        Buffer.alloc(16),
        at,
      ]);
      expect(await store.get("SELECT nonce, updated_at FROM account_secrets")).toEqual({ nonce: Buffer.from([0, 1, 255]), updated_at: at });
      await store.run(
        `INSERT INTO usage (at, day, account, key_id, model, kind, prompt_tokens, completion_tokens, audio_seconds, request_id) VALUES
        (?, '2026-11-25', 'a', 'k', 'm', 'chat', 3, 4, 0.5, 'r1'), (?, '2026-11-25', 'a', 'k', 'm', 'chat', 5, 6, 0.25, 'r2')`,
        [at, at],
      );
      expect(await store.get("SELECT COUNT(*) AS n, SUM(prompt_tokens) AS p, SUM(audio_seconds) AS s FROM usage")).toEqual({ n: 2, p: 8, s: 0.75 });
    } finally {
      await store.close();
    }
  });

  it("a transaction that throws leaves nothing; one that resolves keeps everything; changes are counted", async () => {
    const store = await open(newDb());
    try {
      await expect(
        store.transaction(async (tx) => {
          await tx.run("INSERT INTO settings (name, value) VALUES ('t', '1')");
          throw new Error("midway");
        }),
      ).rejects.toThrow("midway");
      expect(await store.all("SELECT * FROM settings")).toEqual([]);
      await store.transaction(async (tx) => {
        await tx.run("INSERT INTO settings (name, value) VALUES ('t', '1')");
        await tx.run("INSERT INTO settings (name, value) VALUES ('u', '2')");
      });
      expect(await store.run("UPDATE settings SET value = 'x'")).toEqual({ changes: 2 });
      expect(await store.run("INSERT INTO settings (name, value) VALUES ('t', '3') ON CONFLICT (name) DO NOTHING")).toEqual({ changes: 0 });
    } finally {
      await store.close();
    }
  });

  it("changeCount (SQLite) changes with this store's writes, a transaction (even rolled back) and another connection's commit (from the next turn of the event loop); not with a read", async () => {
    const db = newDb();
    const store = await openStore(db, { logger });
    const other = await openStore(db, { logger });
    try {
      if (engine !== "SQLite") return;
      const count = () => store.changeCount!();
      let last = count();
      const changed = () => {
        const now = count();
        const moved = now !== last;
        last = now;
        return moved;
      };
      await store.get("SELECT value FROM settings WHERE name = 'a'");
      await store.all("SELECT * FROM settings");
      expect(changed()).toBe(false);
      await store.run("INSERT INTO settings (name, value) VALUES ('a', '1')");
      expect(changed()).toBe(true);
      await expect(
        store.transaction(async (tx) => {
          await tx.get("SELECT value FROM settings WHERE name = 'a'");
          throw new Error("rolled back");
        }),
      ).rejects.toThrow("rolled back");
      expect(changed()).toBe(true);
      await other.run("UPDATE settings SET value = '2' WHERE name = 'a'");
      await new Promise(setImmediate);
      expect(changed()).toBe(true);
      expect(changed()).toBe(false);
      // a second commit, a turn after the first was seen
      await new Promise(setImmediate);
      await other.run("UPDATE settings SET value = '3' WHERE name = 'a'");
      await new Promise(setImmediate);
      expect(changed()).toBe(true);
    } finally {
      await other.close();
      await store.close();
    }
  });

  it("changeCount (PostgreSQL) moves with this store's writes and another scheduler's commit to keys or accounts (once notified), not with a read or another table's commit; undefined while nothing listens", async () => {
    if (engine === "SQLite") return;
    const db = newDb();
    const store = await openStore(db, { logger });
    const other = await openStore(db, { logger });
    try {
      let last = store.changeCount!();
      /** Waits up to `ms` for the count to move; whether it did. */
      const moves = async (ms = 0): Promise<boolean> => {
        const deadline = Date.now() + ms;
        for (;;) {
          const now = store.changeCount!();
          if (now !== last) {
            last = now;
            return true;
          }
          if (Date.now() >= deadline) return false;
          await new Promise((r) => setTimeout(r, 10));
        }
      };
      expect(last).toBeTypeOf("number");
      await store.get("SELECT * FROM api_keys");
      expect(await moves()).toBe(false);
      await store.run("INSERT INTO settings (name, value) VALUES ('a', '1')"); // this store's own write, whatever the table
      expect(await moves()).toBe(true);
      await other.run("INSERT INTO accounts (name, tier, rpm, created_at) VALUES ('acct', 'pro', NULL, 0)");
      expect(await moves(5000)).toBe(true); // the trigger's notification
      await other.run("UPDATE settings SET value = '2' WHERE name = 'a'");
      expect(await moves(300)).toBe(false); // no key or account changed
      await other.run("UPDATE accounts SET tier = 'free' WHERE name = 'acct'");
      expect(await moves(5000)).toBe(true);
      // the listening connection killed: the count is unknown until a new one listens, then it has moved
      await other.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()");
      const deadline = Date.now() + 5000;
      while (store.changeCount!() !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(store.changeCount!()).toBeUndefined();
      while (store.changeCount!() === undefined && Date.now() < deadline + 5000) await new Promise((r) => setTimeout(r, 50));
      expect(store.changeCount!()).toBeTypeOf("number");
      expect(await moves()).toBe(true);
      await other.run("UPDATE accounts SET tier = 'pro' WHERE name = 'acct'");
      expect(await moves(5000)).toBe(true); // and it hears the notifications again
    } finally {
      await other.close();
      await store.close();
    }
  });

  it("changeCount (PostgreSQL) stops trusting a listening connection cut without a word (its heartbeat unheard), and listens again on a new one", async () => {
    if (engine === "SQLite") return;
    const db = new URL(newDb());
    const server = { port: Number(db.port), host: db.hostname };
    // a loopback proxy in front of the server, whose connections can be silenced: no close, no error, nothing through
    const silenced = new Set<Socket>();
    const sockets: Socket[] = [];
    const proxy = createServer((client) => {
      const upstream = connect(server.port, server.host);
      sockets.push(client);
      const pass = (from: Socket, to: Socket) => from.on("data", (d: Buffer) => silenced.has(client) || to.write(d));
      pass(client, upstream);
      pass(upstream, client);
      const end = () => (client.destroy(), upstream.destroy());
      client.on("error", end).on("close", end);
      upstream.on("error", end).on("close", end);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    db.port = String((proxy.address() as AddressInfo).port);
    db.hostname = "127.0.0.1";
    const warned: string[] = [];
    const watched = createLogger("test", "silent");
    vi.spyOn(watched, "warn").mockImplementation((...args: unknown[]) => void warned.push(String(args.at(-1))));
    const store = await PostgresStore.open({ url: db.href, logger: watched, heartbeatMs: 100 });
    try {
      expect(store.changeCount()).toBeTypeOf("number");
      // the listener is the last connection opened (the pool's first one ran the migrations, and carries the heartbeat)
      const listening = sockets.slice(-1);
      for (const s of listening) silenced.add(s);
      await until(() => store.changeCount() === undefined, 5000, "the unheard heartbeat");
      expect(warned).toEqual([]); // distrusted while it is still the listener (after 3 beats), before it is given up (after 10)
      await until(() => warned.length > 0, 5000, "the listener given up");
      expect(warned[0]).toMatch(/lost/);
      // a new connection listens (10 beats unheard: replaced), and the count is trusted again
      await until(() => store.changeCount() !== undefined, 10_000, "a new listener");
      expect(sockets.length).toBeGreaterThan(listening.length);
    } finally {
      await store.close();
      for (const s of sockets) s.destroy();
      await new Promise((r) => proxy.close(r));
    }
  });

  it("a statement sent while a transaction runs is not part of it: the rollback leaves the statement's row", async () => {
    const store = await open(newDb());
    try {
      let inside!: () => void;
      const started = new Promise<void>((r) => (inside = r));
      const tx = store.transaction(async (t) => {
        await t.run("INSERT INTO settings (name, value) VALUES ('in', '1')");
        inside();
        await new Promise((r) => setTimeout(r, 50));
        throw new Error("rolled back");
      });
      await started;
      const outside = store.run("INSERT INTO settings (name, value) VALUES ('out', '1')");
      await expect(tx).rejects.toThrow("rolled back");
      await outside;
      expect(await store.all("SELECT name FROM settings")).toEqual([{ name: "out" }]);
    } finally {
      await store.close();
    }
  });
});

describe.each(engines)("the store on %s, per-account caps", (engine, newDb) => {
  it("requests sent at once (through two schedulers on PostgreSQL) cannot pass an account's caps together (MCP configurations, secrets)", async () => {
    const db = newDb();
    // SQLite: one scheduler's store (two connections in one process would wait on each other's write lock synchronously)
    const one = await openStore(db, { logger });
    const two = engine === "SQLite" ? one : await openStore(db, { logger });
    try {
      const config = { name: "c", server_type: "mcp" as const, config: { transport: "stdio", server: "echo" } };
      const servers = [new McpStore(one), new McpStore(two)];
      const created = await Promise.all(Array.from({ length: 16 }, (_, i) => servers[i % 2]!.create("acme", { ...config, name: `c${i}` }, 5)));
      expect(created.filter(Boolean)).toHaveLength(5);
      expect(await servers[0]!.list("acme")).toHaveLength(5);
      const key = randomBytes(32);
      const secrets = [new AccountSecrets(one, key), new AccountSecrets(two, key)];
      const set = await Promise.all(Array.from({ length: MAX_SECRETS_PER_ACCOUNT + 10 }, (_, i) => secrets[i % 2]!.set("acme", `S${i}`, "v")));
      expect(set.filter(Boolean)).toHaveLength(MAX_SECRETS_PER_ACCOUNT);
      expect(await secrets[1]!.names("acme")).toHaveLength(MAX_SECRETS_PER_ACCOUNT);
    } finally {
      await one.close();
      if (two !== one) await two.close();
    }
  });
});

describe.each(engines)("the store on %s, refusals", (engine, newDb) => {
  it("refuses a database a newer Kiln migrated, naming its version", async () => {
    const db = newDb();
    const store = await openStore(db, { logger });
    await store.run(engine === "SQLite" ? "PRAGMA user_version = 99" : "UPDATE kiln_schema SET version = 99");
    await store.close();
    await expect(openStore(db, { logger })).rejects.toThrow(/schema version 99 is newer than this Kiln's \d+/);
  });

  it("a statement sent through the store from inside a transaction is an error, not a hang (SQLite) or a second connection (PostgreSQL)", async () => {
    const store = await openStore(newDb(), { logger, transactionWaitMs: 300 });
    try {
      const inner = store.transaction(async () => {
        await store.run("INSERT INTO settings (name, value) VALUES ('x', '1')");
      });
      // after the body's first await: it waits for the transaction (SQLite), until the deadline
      const later = store.transaction(async (tx) => {
        await tx.get("SELECT 1 AS one");
        await store.run("INSERT INTO settings (name, value) VALUES ('y', '1')");
      });
      if (engine === "SQLite") {
        await expect(inner).rejects.toThrow(/must go through the transaction's runner/);
        await expect(later).rejects.toThrow(/waited 300 ms for a transaction to end/);
        expect(await store.get("SELECT COUNT(*) AS n FROM settings WHERE name IN ('x', 'y')")).toEqual({ n: 0 });
      } else await Promise.all([inner, later]); // PostgreSQL: another pooled connection, committed on its own
    } finally {
      await store.close();
    }
  });
});

describe.skipIf(!PG)("the store on PostgreSQL, several schedulers", () => {
  it("a connection the server drops in the middle of a transaction fails that transaction, not the process; the store is unready until the server answers again", async () => {
    const db = createPostgresDatabase(postgresServerUrl(server!.port));
    const name = new URL(db).pathname.slice(1);
    const store = await openStore(db, { logger });
    try {
      await expect(
        store.transaction(async (tx) => {
          await tx.run("INSERT INTO settings (name, value) VALUES ('a', '1')");
          server!.sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'`);
          await new Promise((r) => setTimeout(r, 100)); // the connection's 'error' arrives while it is checked out
          await tx.run("INSERT INTO settings (name, value) VALUES ('b', '1')");
        }),
      ).rejects.toThrow();
      expect(store.open).toBe(false);
      expect(await store.all("SELECT name FROM settings")).toEqual([]); // nothing of it was kept; a new connection answers
      expect(store.open).toBe(true);
    } finally {
      await store.close();
    }
  });

  it("schedulers starting at once on a new database migrate it once (an advisory lock), and all open", async () => {
    const db = createPostgresDatabase(postgresServerUrl(server!.port));
    const stores = await Promise.all(Array.from({ length: 4 }, () => openStore(db, { logger, poolSize: 2 })));
    try {
      expect(await stores[0]!.all("SELECT version FROM kiln_schema")).toEqual([{ version: migrations("postgres").length }]);
      await stores[1]!.run("INSERT INTO settings (name, value) VALUES ('shared', 'yes')");
      expect(await stores[3]!.get("SELECT value FROM settings WHERE name = 'shared'")).toEqual({ value: "yes" });
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it("a server that cannot be reached fails the open with the server's address and no password", async () => {
    const err = await openStore("postgres://kiln:hunter2-secret@127.0.0.1:1/kiln", { logger }).catch((e: unknown) => e as Error);
    expect((err as Error).message).toMatch(/^--db \/ KILN_DB: the PostgreSQL database postgres:\/\/kiln:\*\*\*@127\.0\.0\.1:1\/kiln cannot be used: .*ECONNREFUSED/);
    expect((err as Error).message).not.toContain("hunter2-secret");
  });
});

if (!PG)
  describe.skip("the store on PostgreSQL (skipped: PostgreSQL's server binaries are not installed; apt-get install postgresql)", () => {
    it("contract", () => undefined);
  });

describe("numberedPlaceholders", () => {
  it("numbers each ? outside quotes, and leaves a ? in a string or an identifier alone", () => {
    expect(numberedPlaceholders("SELECT a FROM t WHERE b = ? AND c IN (?, ?)")).toBe("SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)");
    expect(numberedPlaceholders("SELECT '?', 'it''s ?', \"col?\" FROM t WHERE x = ?")).toBe("SELECT '?', 'it''s ?', \"col?\" FROM t WHERE x = $1");
  });
});

/**
 * The model catalog service over the store, the same on both engines (SQLite in a temporary file,
 * PostgreSQL on a throwaway server; skipped visibly where absent): what it serves with and without
 * an operator's catalog, and how two schedulers on one database agree on it.
 */
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../core/log.js";
import { parseOperatorCatalog, type OperatorCatalog } from "../../models/operator-catalog.js";
import { until } from "../../scripts/lib/run.js";
import { createPostgresDatabase, postgresServerUrl } from "../../test/helpers/db.js";
import { postgresBin, startPostgres, type Postgres } from "../../test/helpers/postgres.js";
import { tempDir } from "../../test/helpers/temp.js";
import { openStore, type Store } from "../store/index.js";
import { CatalogStore } from "./store.js";
import { ModelCatalog } from "./service.js";

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

const catalogOf = (...models: Record<string, unknown>[]): OperatorCatalog => parseOperatorCatalog({ models });
const house = catalogOf({ id: "house/chat", source: "hf:org/repo:Q4_K_M", aliases: ["gpt-4o", "chat"] }, { id: "famB-v3.1", source: "/models/b.gguf" });

describe.each(engines)("the model catalog on %s", (_engine, newDb) => {
  const opened: { close(): unknown }[] = [];
  const open = async (db: string): Promise<Store> => {
    const store = await openStore(db, { logger });
    opened.push(store);
    return store;
  };
  const catalog = async (store: Store, more: { file?: OperatorCatalog; pollMs?: number } = {}): Promise<ModelCatalog> => {
    const c = await ModelCatalog.open({ store, logger, ...more });
    opened.unshift(c); // closed before its store
    return c;
  };
  afterEach(async () => {
    for (const o of opened.splice(0)) await o.close();
  });

  it("serves the eight built-in ids while no operator catalog is stored: nothing changes", async () => {
    const c = await catalog(await open(newDb()));
    expect(c.active).toBe(false);
    expect(c.entries).toEqual([]);
    expect(c.version).toBe(0);
    expect(c.canonical("famB-v3.1")).toBe("famB-v3.1");
    expect(c.canonical("famA4:405b")).toBe("famA4:405b");
    expect(c.canonical("gpt-4o")).toBeUndefined();
    expect(c.resolve("famB-v3.1")).toBeUndefined();
  });

  it("with --catalog, stores the file's catalog over the stored one and serves only its ids and aliases, each as its id", async () => {
    const db = newDb();
    await catalog(await open(db), { file: catalogOf({ id: "old", source: "/m/old.gguf" }) });
    const c = await catalog(await open(db), { file: house });
    expect(c.active).toBe(true);
    expect(c.entries.map((e) => e.id)).toEqual(["house/chat", "famB-v3.1"]);
    expect(c.resolve("gpt-4o")).toEqual({ ...house.models[0] });
    expect(c.canonical("chat")).toBe("house/chat");
    expect(c.canonical("house/chat")).toBe("house/chat");
    expect(c.canonical("famB-v3.1")).toBe("famB-v3.1");
    expect(c.canonical("famA4:405b")).toBeUndefined(); // a built-in id the catalog does not list
    expect(c.canonical("old")).toBeUndefined();
    // what is stored is the file's catalog, whole, for any scheduler that starts on the database without --catalog
    const other = await catalog(await open(db));
    expect(other.entries).toEqual(house.models);
    expect(other.version).toBe(c.version);
  });

  it("a second scheduler on the database takes up an edit, and a removal, within its poll", async () => {
    const db = newDb();
    const a = await catalog(await open(db), { file: house });
    const b = await catalog(await open(db), { pollMs: 50 });
    const changes: number[] = [];
    b.onChange(() => changes.push(b.version));
    await a.replace(catalogOf({ id: "house/chat", source: "hf:org/repo:Q8_0", aliases: ["gpt-4.1"] }));
    expect(a.canonical("gpt-4.1")).toBe("house/chat"); // the writer serves it at once
    await until(() => b.canonical("gpt-4.1") === "house/chat", 5000, "the second scheduler to take up the edit");
    expect(b.canonical("gpt-4o")).toBeUndefined();
    expect(b.entries[0]!.source).toBe("hf:org/repo:Q8_0");
    await a.replace(undefined);
    await until(() => !b.active, 5000, "the second scheduler to take up the removal");
    expect(b.canonical("famA4:70b")).toBe("famA4:70b");
    expect(changes).toEqual([a.version - 1, a.version]);
  });

  it("refresh says whether the stored catalog changed, and reads it only then", async () => {
    const db = newDb();
    const a = await catalog(await open(db));
    const b = await catalog(await open(db), { pollMs: 3_600_000 });
    const reads = vi.spyOn(CatalogStore.prototype, "read");
    try {
      expect(await b.refresh()).toBe(false);
      expect(reads).not.toHaveBeenCalled(); // the version alone was asked
      await a.replace(house);
      expect(await b.refresh()).toBe(true);
      expect(b.active).toBe(true);
      expect(reads).toHaveBeenCalledTimes(1);
      expect(await b.refresh()).toBe(false);
      expect(reads).toHaveBeenCalledTimes(1);
    } finally {
      reads.mockRestore();
    }
  });

  it("a stored catalog that fails its checks fails the start naming the entry and field; a running scheduler keeps the one it serves", async () => {
    const db = newDb();
    const store = await open(db);
    const a = await catalog(store, { file: house, pollMs: 3_600_000 });
    // what a newer Kiln, or a hand, could leave: an entry whose replicas contradict each other
    await new CatalogStore(store).replace([{ ...house.models[0]!, min_replicas: 2, max_replicas: 1 }]);
    expect(await a.refresh()).toBe(false);
    expect(a.canonical("gpt-4o")).toBe("house/chat");
    expect(a.entries).toEqual(house.models);
    await expect(ModelCatalog.open({ store: await open(db), logger })).rejects.toThrow(
      /^--db \/ KILN_DB: the model catalog stored in .* \(version 2\) is refused: models\[0\] \("house\/chat"\): max_replicas: must be ≥ min_replicas \(2\), got 1$/,
    );
  });

  it("replaces the stored catalog in one transaction: a write that fails midway leaves the old one whole", async () => {
    const db = newDb();
    const store = await open(db);
    const stored = new CatalogStore(store);
    const before = await stored.replace(house.models);
    // two entries with one id: the second insert breaks the table's uniqueness after the first went in
    await expect(stored.replace([house.models[1]!, { ...house.models[0]!, id: "famB-v3.1" }])).rejects.toThrow();
    expect(await stored.read()).toEqual(before);
    expect(await stored.version()).toBe(before.version);
  });
});

/** The usage ledger's buffered writer on a real SQLite store, with the database failing for a while. */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import { tempDir } from "../../test/helpers/temp.js";
import { SqliteStore } from "../store/sqlite.js";
import type { SqlRunner, Store } from "../store/index.js";
import { UsageLedger } from "./ledger.js";

/** The real store, whose transactions fail while `down` (a database that went away), counting the tries. */
function flaky(real: SqliteStore): Store & { down: boolean; tries: number } {
  const wrapper = {
    down: false,
    tries: 0,
    dialect: real.dialect as "sqlite",
    location: real.location,
    get open() {
      return real.open;
    },
    all: real.all.bind(real),
    get: real.get.bind(real),
    run: real.run.bind(real),
    close: real.close.bind(real),
    async transaction<T>(body: (tx: SqlRunner) => Promise<T>): Promise<T> {
      wrapper.tries++;
      await new Promise((r) => setTimeout(r, 5));
      if (wrapper.down) throw new Error("connection refused");
      return real.transaction(body);
    },
  };
  return wrapper;
}

const row = (i: number) => ({ account: "acme", keyId: "k", model: "m", kind: "chat" as const, promptTokens: i, completionTokens: 1, audioSeconds: 0, requestId: `r${i}` });

describe("UsageLedger", () => {
  it("while the database fails, flushes asked for meanwhile share one pending write; once it is back every row is written once", async () => {
    const store = flaky(new SqliteStore(join(tempDir(), "kiln.db")));
    const ledger = new UsageLedger(store, { logger: createLogger("test", "silent"), flushMs: 60_000, maxBuffered: 50 }); // up to 500 rows kept while it fails
    store.down = true;
    const flushes: Promise<void>[] = [];
    for (let i = 0; i < 250; i++) {
      ledger.record(row(i)); // past 50 buffered, each record asks for a flush
      flushes.push(ledger.flush());
    }
    await Promise.all(flushes);
    expect(store.tries).toBeLessThanOrEqual(3); // not one write per flush asked for
    store.down = false;
    await ledger.flush();
    expect(await store.get("SELECT COUNT(*) AS n, SUM(prompt_tokens) AS p FROM usage")).toEqual({ n: 250, p: (249 * 250) / 2 });
    await ledger.close();
    await store.close();
  });

  it("writes a batch of any size in statements of 100, 10 and 1 rows", async () => {
    const store = new SqliteStore(join(tempDir(), "kiln.db"));
    const ledger = new UsageLedger(store, { logger: createLogger("test", "silent"), flushMs: 60_000 });
    for (let i = 0; i < 237; i++) ledger.record(row(i));
    await ledger.flush();
    expect(await store.get("SELECT COUNT(*) AS n, COUNT(DISTINCT request_id) AS d FROM usage")).toEqual({ n: 237, d: 237 });
    await ledger.close();
    await store.close();
  });
});

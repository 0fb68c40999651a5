/**
 * Two schedulers, one database and one Redis (`--redis`): a key created on one works on the other, a
 * revocation on one is honoured by the other at once, and one account's requests spread over both
 * hit its per-minute limit exactly once. The database is PostgreSQL (Debian's binaries, started here)
 * where installed, else one SQLite file; Debian's redis-server, started here on a free port; skipped
 * visibly where it is absent.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessScheduler, tempDir } from "./helpers/fleet.js";
import { createPostgresDatabase, dbSettings, postgresServerUrl, testDb } from "./helpers/db.js";
import { postgresBin, redisBin, startPostgres, startRedis, type Postgres, type RedisServer } from "./helpers/postgres.js";

const REDIS = redisBin();
const PG = postgresBin();

describe.skipIf(!REDIS)("two schedulers sharing a database and Redis", () => {
  let redis: RedisServer;
  let pg: Postgres | undefined;
  let a: SchedulerHandle;
  let b: SchedulerHandle;

  beforeAll(async () => {
    redis = await startRedis(REDIS!);
    if (PG) pg = await startPostgres(PG);
    const db = pg ? createPostgresDatabase(postgresServerUrl(pg.port)) : testDb();
    a = await inProcessScheduler({ db, redis: redis.url, standardRpm: "10", ...dbSettings(db) });
    b = await inProcessScheduler({ db, redis: redis.url, standardRpm: "10", ...dbSettings(db) });
  }, 60_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    redis?.stop();
    pg?.stop();
  });

  const get = (s: SchedulerHandle, key: string) => fetch(`${httpBase(s)}/v1/models`, { headers: { authorization: `Bearer ${key}` } });

  it("counts one account's requests over both against its limit exactly once", async () => {
    const { token } = await a.keys.create({ account: "shared", tier: "standard" });
    const statuses: number[] = [];
    for (let i = 0; i < 16; i++) statuses.push((await get(i % 2 ? b : a, token)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
    expect(statuses.slice(0, 10).every((s) => s === 200)).toBe(true);
    const refused = await get(b, token);
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    // another account has its own window
    const { token: other } = await b.keys.create({ account: "neighbour", tier: "standard" });
    expect((await get(a, other)).status).toBe(200);
  });

  it("a key created on one works on the other, and a revocation on one is honoured by the other at once", async () => {
    const { token, id } = await a.keys.create({ account: "revoked", tier: "standard" });
    expect((await get(b, token)).status).toBe(200);
    await a.keys.revoke(id);
    const res = await get(b, token);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("revoked_api_key");
  });

  it("refuses with a 503 while Redis cannot be reached, rather than counting nothing, and /readyz says so", async () => {
    const { token } = await a.keys.create({ account: "outage", tier: "standard" });
    expect((await fetch(`${httpBase(a)}/readyz`)).status).toBe(200);
    redis.stop();
    const res = await get(a, token);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("limits_unavailable");
    const ready = await fetch(`${httpBase(a)}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: Record<string, boolean> }).checks).toMatchObject({ store: true, limits: false });
  });

  it("a scheduler whose Redis cannot be reached does not start", async () => {
    await expect(inProcessScheduler({ db: join(tempDir(), "kiln.db"), redis: "redis://127.0.0.1:1" })).rejects.toThrow();
  });
});

if (!REDIS)
  describe.skip("two schedulers sharing a database and Redis (skipped: redis-server is not installed; apt-get install redis-server)", () => {
    it("shared limits", () => undefined);
  });

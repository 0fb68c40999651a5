/**
 * The fair-use counts in a real Redis (Debian's redis-server on a free port; skipped visibly where
 * absent), as two schedulers sharing it see them: places in flight, token quotas, leases of a
 * scheduler that died, and an outage.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { createLogger } from "../../core/log.js";
import { redisBin, startRedis, type RedisServer } from "../../test/helpers/postgres.js";
import { TokenQuota } from "./tokens.js";
import { RedisLimits } from "./redis.js";

const REDIS = redisBin();
const logger = createLogger("test", "silent");
const none = { free: 0, standard: 0, pro: 0, enterprise: 0 };

describe.skipIf(!REDIS)("RedisLimits shared by two schedulers", () => {
  let server: RedisServer;
  const opened: RedisLimits[] = [];
  let prefix = 0;
  beforeAll(async () => {
    server = await startRedis(REDIS!);
  });
  afterAll(() => server?.stop());
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()));
  });

  /** Two schedulers' counts on one Redis, under a prefix of this test's own. */
  async function pair(options: { leaseMs?: number; usedOn?: (account: string, day: string) => number } = {}): Promise<RedisLimits[]> {
    const p = `t${prefix++}:`;
    const make = async () => {
      const l = new RedisLimits({ url: server.url, prefix: p, usedOn: options.usedOn ?? (() => 0), logger, ...(options.leaseMs ? { leaseMs: options.leaseMs } : {}) });
      await l.connect();
      opened.push(l);
      return l;
    };
    return [await make(), await make()];
  }

  it("counts an account's places in flight once over both: the cap holds, a place given back on one frees it for the other", async () => {
    const [a, b] = await pair();
    const first = await a!.acquire("acme", 2);
    await b!.acquire("acme", 2);
    await expect(a!.acquire("acme", 2)).rejects.toMatchObject({ status: 429, code: "too_many_requests_in_flight" });
    await expect(b!.acquire("acme", 2)).rejects.toMatchObject({ status: 429 });
    await b!.acquire("other", 2); // its own places
    first();
    first(); // once
    await b!.acquire("acme", 2);
    await expect(a!.acquire("acme", 2)).rejects.toMatchObject({ status: 429 });
  });

  it("a scheduler that dies holding places loses them when their lease ends; a live one keeps its places past it by renewing", async () => {
    const [live, dying] = await pair({ leaseMs: 300 });
    await live!.acquire("acme", 2);
    await dying!.acquire("acme", 2);
    await dying!.close(); // no release: its lease runs out
    await new Promise((r) => setTimeout(r, 450));
    await live!.acquire("acme", 2); // the dead scheduler's place is free again
    await expect(live!.acquire("acme", 2)).rejects.toMatchObject({ status: 429 }); // the live one's first place outlived its 300 ms lease
  });

  it("token quotas: what one scheduler holds and counts, the other sees; the day is read from the ledger once", async () => {
    const asked: string[] = [];
    const [a, b] = await pair({
      usedOn: (account, day) => {
        asked.push(`${account} ${day}`);
        return 900;
      },
    });
    const quota = (counter: RedisLimits) => new TokenQuota({ perMinute: { ...none, free: 100 }, perDay: { ...none, free: 1000 }, counter });
    const qa = quota(a!);
    const qb = quota(b!);
    const release = await qa.reserve("acme", "free", 60);
    await expect(qb.reserve("acme", "free", 50)).rejects.toMatchObject({
      status: 429,
      code: "token_quota_exceeded",
      message: expect.stringMatching(/^max_tokens: .*100 tokens per minute.*\(60 held/),
    });
    expect(await qb.check("acme", "free")).toMatchObject({ "x-ratelimit-remaining-tokens": "40", "x-ratelimit-remaining-tokens-day": "40" });
    release();
    qa.add("acme", 30);
    await new Promise((r) => setTimeout(r, 50)); // the count is sent without waiting for it
    expect(await qb.check("acme", "free")).toMatchObject({ "x-ratelimit-remaining-tokens": "70", "x-ratelimit-remaining-tokens-day": "70" });
    expect(asked).toHaveLength(1); // seeded by the first scheduler to count the day; the second found it
    qb.add("acme", 80);
    await new Promise((r) => setTimeout(r, 50));
    await expect(qa.check("acme", "free")).rejects.toMatchObject({
      status: 429,
      code: "token_quota_exceeded",
      headers: expect.objectContaining({ "x-ratelimit-remaining-tokens": "0", "x-ratelimit-remaining-tokens-day": "0" }),
    });
  });

  it("counting an answer drops the seconds older than the window, so an account's minute holds at most 61 fields", async () => {
    const [a] = await pair();
    const raw = new Redis(server.url);
    try {
      const key = `t${prefix - 1}:tok:min:acme`;
      const [seconds] = await raw.time();
      const now = Number(seconds);
      await raw.hset(key, String(now - 3600), "5", String(now - 61), "7", String(now - 10), "3");
      a!.add("acme", 4);
      await new Promise((r) => setTimeout(r, 50));
      const fields = await raw.hgetall(key);
      expect(Object.keys(fields)).not.toContain(String(now - 3600));
      expect(Object.keys(fields)).not.toContain(String(now - 61));
      expect(fields[String(now - 10)]).toBe("3");
      expect(Object.values(fields).reduce((n, v) => n + Number(v), 0)).toBe(7);
    } finally {
      raw.disconnect();
    }
  });

  it("refuses with a 503 while Redis cannot be reached, rather than counting nothing", async () => {
    const l = new RedisLimits({ url: "redis://127.0.0.1:1", usedOn: () => 0, logger });
    opened.push(l);
    await expect(l.acquire("acme", 2)).rejects.toMatchObject({ status: 503, code: "limits_unavailable" });
    await expect(new TokenQuota({ perMinute: { ...none, free: 10 }, perDay: none, counter: l }).check("acme", "free")).rejects.toMatchObject({
      status: 503,
      code: "limits_unavailable",
    });
  });
});

if (!REDIS)
  describe.skip("RedisLimits (skipped: redis-server is not installed; apt-get install redis-server)", () => {
    it("shared counts", () => undefined);
  });

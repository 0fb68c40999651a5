import { describe, expect, it } from "vitest";
import { AUDIO_SECONDS, MemoryTokenCounter, TokenQuota } from "./tokens.js";

const none = { free: 0, standard: 0, pro: 0, enterprise: 0 };

describe("TokenQuota", async () => {
  it("admits while tokens are left in any 60 s, refuses with Retry-After until enough have left the window", async () => {
    let now = Date.parse("2026-11-24T10:00:00Z");
    const q = new TokenQuota({
      perMinute: { ...none, free: 100 },
      perDay: none,
      counter: new MemoryTokenCounter({ usedOn: () => 0, now: () => now, monotonic: () => now }),
      now: () => now,
    });
    expect(await q.check("a", "free")).toEqual({ "x-ratelimit-limit-tokens": "100", "x-ratelimit-remaining-tokens": "100", "x-ratelimit-reset-tokens": "0s" });
    q.add("a", 60);
    now += 10_000;
    q.add("a", 50); // the request that crosses the quota was admitted before it: it is served whole
    await expect(q.check("a", "free")).rejects.toMatchObject({
      status: 429,
      code: "token_quota_exceeded",
      headers: expect.objectContaining({ "Retry-After": "50", "x-ratelimit-remaining-tokens": "0" }),
    });
    expect(await q.check("a", "pro")).toEqual({}); // no quota on that tier
    expect([q.applies("free"), q.applies("pro")]).toEqual([true, false]); // what the middleware asks before checking
    expect((await q.check("b", "free"))["x-ratelimit-remaining-tokens"]).toBe("100"); // per account
    now += 50_001; // the first 60 have left the window
    expect((await q.check("a", "free"))["x-ratelimit-remaining-tokens"]).toBe("50");
  });

  it("counts the day from the ledger the first time an account is seen, and starts again the next UTC day", async () => {
    let now = Date.parse("2026-11-24T23:59:00Z");
    const asked: string[] = [];
    const q = new TokenQuota({
      perMinute: none,
      perDay: { ...none, standard: 1000 },
      counter: new MemoryTokenCounter({
        usedOn: (account, day) => {
          asked.push(`${account} ${day}`);
          return 990;
        },
        now: () => now,
        monotonic: () => now,
      }),
      now: () => now,
    });
    expect((await q.check("a", "standard"))["x-ratelimit-remaining-tokens-day"]).toBe("10");
    q.add("a", 10);
    await expect(q.check("a", "standard")).rejects.toMatchObject({ code: "token_quota_exceeded", headers: expect.objectContaining({ "Retry-After": "60" }) });
    now += 120_000;
    expect((await q.check("a", "standard"))["x-ratelimit-remaining-tokens-day"]).toBe("10"); // the new day's ledger count
    expect(asked).toEqual(["a 2026-11-24", "a 2026-11-25"]);
    q.add("b", 5); // an account this scheduler has not checked today: the ledger is not read for it
    expect(asked).toEqual(["a 2026-11-24", "a 2026-11-25"]);
  });

  it("holds what requests in flight may use: several sent at once cannot all pass a nearly spent quota", async () => {
    const now = Date.parse("2026-11-24T12:00:00Z");
    const q = new TokenQuota({
      perMinute: { ...none, free: 100 },
      perDay: none,
      counter: new MemoryTokenCounter({ usedOn: () => 0, now: () => now, monotonic: () => now }),
      now: () => now,
    });
    q.add("a", 50);
    const first = await q.reserve("a", "free", 40);
    await expect(q.reserve("a", "free", 40)).rejects.toMatchObject({ code: "token_quota_exceeded", message: expect.stringMatching(/^max_tokens:/) });
    expect((await q.check("a", "free"))["x-ratelimit-remaining-tokens"]).toBe("10");
    first();
    first(); // given back once
    expect((await q.check("a", "free"))["x-ratelimit-remaining-tokens"]).toBe("50");
    expect(await q.reserve("a", "pro", 1_000_000)).toBeTypeOf("function"); // no quota on that tier
  });

  it("with both quotas spent, tells the longer wait and both sets of headers", async () => {
    const now = Date.parse("2026-11-24T12:00:00Z");
    const q = new TokenQuota({
      perMinute: { ...none, free: 10 },
      perDay: { ...none, free: 10 },
      counter: new MemoryTokenCounter({ usedOn: () => 0, now: () => now, monotonic: () => now }),
      now: () => now,
    });
    await q.check("a", "free");
    q.add("a", 20);
    await expect(q.check("a", "free")).rejects.toMatchObject({
      code: "token_quota_exceeded",
      headers: expect.objectContaining({ "Retry-After": String(12 * 3600), "x-ratelimit-remaining-tokens": "0", "x-ratelimit-remaining-tokens-day": "0" }),
    });
  });
});

describe("TokenQuota.applies", () => {
  it("is true for a tier with a quota per minute or per day only, false for one with neither", () => {
    const q = new TokenQuota({ perMinute: { ...none, free: 100 }, perDay: { ...none, standard: 1000 }, counter: new MemoryTokenCounter({ usedOn: () => 0 }) });
    expect((["free", "standard", "pro", "enterprise"] as const).map((t) => q.applies(t))).toEqual([true, true, false, false]);
  });
});

describe("TokenQuota without any quota", () => {
  it("counts nothing where no tier has a quota (a shared counter would keep a key per account for nothing)", async () => {
    const counted: string[] = [];
    const counter = new MemoryTokenCounter({ usedOn: () => 0 });
    const spy = {
      usage: counter.usage.bind(counter),
      hold: counter.hold.bind(counter),
      add: (account: string, tokens: number) => {
        counted.push(`${account}:${tokens}`);
      },
    };
    new TokenQuota({ perMinute: none, perDay: none, counter: spy }).add("acme", 50);
    expect(counted).toEqual([]);
    new TokenQuota({ perMinute: { ...none, free: 10 }, perDay: none, counter: spy }).add("acme", 50);
    expect(counted).toEqual(["acme:50"]);
  });
});

describe("TokenQuota counting audio seconds (AUDIO_SECONDS)", () => {
  it("words its refusal and headers in audio seconds, and counts the day from the ledger's seconds", async () => {
    const now = Date.parse("2026-11-24T12:00:00Z");
    const q = new TokenQuota({
      unit: AUDIO_SECONDS,
      perMinute: none,
      perDay: { ...none, free: 3600 },
      counter: new MemoryTokenCounter({ usedOn: () => 3000, now: () => now, monotonic: () => now }),
      now: () => now,
    });
    expect(await q.check("a", "free")).toEqual({
      "x-ratelimit-limit-audio-seconds-day": "3600",
      "x-ratelimit-remaining-audio-seconds-day": "600",
      "x-ratelimit-reset-audio-seconds-day": "43200s",
    });
    q.add("a", 601);
    await expect(q.check("a", "free")).rejects.toMatchObject({
      status: 429,
      code: "audio_quota_exceeded",
      message: "file: this account used 3601 of its 3600 audio seconds for today (UTC); retry in 43200 s",
      headers: expect.objectContaining({ "Retry-After": "43200" }),
    });
  });
});

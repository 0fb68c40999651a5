/**
 * Fair use across accounts, against a real scheduler and a real agent (the tiny test model):
 * limits count per account whatever the number of its keys, follow the account's current tier,
 * cap the account's completions in flight, and the fleet's queue serves accounts in turn.
 */
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, postChat, until, waitForAgents } from "./helpers/fleet.js";
import { testDb } from "./helpers/db.js";

const STANDARD_RPM = 10;
const STANDARD_INFLIGHT = 2;

let scheduler: SchedulerHandle;
let agent: AgentHandle;
let base: string;
let db: string;

beforeAll(async () => {
  db = testDb();
  // One sequence: one completion generates at a time, every other one waits in the fleet's queue.
  scheduler = await inProcessScheduler({ db, standardRpm: String(STANDARD_RPM), maxInflight: `standard=${STANDARD_INFLIGHT}` });
  agent = await inProcessAgent(scheduler, { sequences: "1" });
  await waitForAgents(scheduler, 1);
  base = httpBase(scheduler);
});

afterAll(async () => {
  await agent?.close();
  await scheduler?.close();
});

const user = (content = "Hello") => [{ role: "user", content }];
const chat = (key: string, body: Record<string, unknown> = {}, init: RequestInit = {}) =>
  postChat(base, key, { model: MODEL_ID, messages: user(), max_tokens: 2, temperature: 0, ...body }, init);
const models = (key: string) => fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } });

/** Starts a streamed completion and returns once its first event has arrived (it is generating). */
async function openStream(key: string, maxTokens = 1800, signal?: AbortSignal): Promise<{ res: Response; reader: ReadableStreamDefaultReader<Uint8Array> }> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    ...(signal ? { signal } : {}),
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL_ID, messages: user("Tell me a long story"), max_tokens: maxTokens, temperature: 0, stream: true }),
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  await reader.read();
  return { res, reader };
}

/** Reads a stream to its end; returns its text. */
async function readAll(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let text = "";
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
  return text;
}

const fleetState = () => ({ queued: scheduler.fleet.queued, inflight: scheduler.fleet.snapshot()[0]!.pools[0]!.inflight });
const fleetIdle = () => until(() => fleetState().queued === 0 && fleetState().inflight === 0, 20_000, "the fleet to be idle");

/** A request of a swallowed outcome (aborted on purpose). */
const quietly = <T>(p: Promise<T>): Promise<T | undefined> => p.catch(() => undefined);

describe("requests per minute count per account", () => {
  it("one account cannot exceed its limit with five keys: the 11th request across them is a 429 with body and headers", async () => {
    const keys = await Promise.all(Array.from({ length: 5 }, () => scheduler.keys.create({ account: "five-keys", tier: "standard" })));
    for (let i = 0; i < STANDARD_RPM; i++) {
      const key = keys[i % keys.length]!.token;
      // Completions and model lists alike count against the account.
      const res = i % 2 === 0 ? await chat(key) : await models(key);
      expect(res.status, `request ${i + 1}`).toBe(200);
      expect(res.headers.get("x-ratelimit-limit-requests")).toBe(String(STANDARD_RPM));
      expect(res.headers.get("x-ratelimit-remaining-requests")).toBe(String(STANDARD_RPM - i - 1));
      if (res instanceof Response) await res.arrayBuffer();
    }
    for (const { token } of keys) {
      const limited = await chat(token);
      expect(limited.status).toBe(429);
      expect(limited.body.error).toEqual({
        type: "rate_limit_error",
        code: "rate_limit_exceeded",
        message: expect.stringMatching(/^rate limit: 10 requests per minute for this account; retry in \d+ s$/),
        param: null,
      });
      const retryAfter = Number(limited.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(limited.headers.get("x-ratelimit-limit-requests")).toBe(String(STANDARD_RPM));
      expect(limited.headers.get("x-ratelimit-remaining-requests")).toBe("0");
      expect(limited.headers.get("x-ratelimit-reset-requests")).toBe(`${retryAfter}s`);
    }
    // A sixth key made now shares the spent limit too; another account of the same tier does not.
    const sixth = await scheduler.keys.create({ account: "five-keys", tier: "standard" });
    expect((await models(sixth.token)).status).toBe(429);
    const other = await scheduler.keys.create({ account: "someone-else", tier: "standard" });
    const res = await models(other.token);
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ratelimit-remaining-requests")).toBe(String(STANDARD_RPM - 1));
  });

  it("a tier change (`kiln keys create` for the account) applies to its existing key at the next request", async () => {
    const { token } = await scheduler.keys.create({ account: "retier", tier: "standard" });
    for (let i = 0; i < STANDARD_RPM; i++) expect((await models(token)).status).toBe(200);
    expect((await models(token)).status).toBe(429);
    // Another process re-tiers the account on the scheduler's database: the old key is pro at once.
    await promisify(execFile)(process.execPath, [resolve("bin/kiln.js"), "keys", "create", "--db", db, "--account", "retier", "--tier", "pro"]);
    const pro = await models(token);
    expect(pro.status).toBe(200);
    expect(pro.headers.get("x-ratelimit-limit-requests")).toBe("1000");
    expect(pro.headers.get("x-ratelimit-remaining-requests")).toBe(String(1000 - STANDARD_RPM - 1));
    // And down again, to an enterprise figure below what the window holds: refused at once.
    await scheduler.keys.create({ account: "retier", tier: "enterprise", rpm: 5 });
    const down = await models(token);
    expect(down.status).toBe(429);
    expect(down.headers.get("x-ratelimit-limit-requests")).toBe("5");
    expect((await scheduler.keys.list()).filter((k) => k.account === "retier").map((k) => [k.tier, k.rpm])).toEqual([
      ["enterprise", 5],
      ["enterprise", 5],
      ["enterprise", 5],
    ]);
  });
});

describe("completions in flight per account", () => {
  /** Fills the account's cap (one generating, the rest queued) and checks that the next is refused. */
  async function expectFullCapThenRefused(key: string, other: string): Promise<void> {
    const ac = new AbortController();
    const running = await openStream(key, 1800, ac.signal);
    const queued = Array.from({ length: STANDARD_INFLIGHT - 1 }, () => quietly(chat(key, { stream: true, max_tokens: 4 }, { signal: ac.signal })));
    await until(() => fleetState().queued === STANDARD_INFLIGHT - 1, 10_000, "the account's other requests to queue");
    const refused = await chat(key, { stream: true });
    expect(refused.status).toBe(429);
    expect(refused.body.error).toEqual({
      type: "rate_limit_error",
      code: "too_many_requests_in_flight",
      message: expect.stringContaining(`at most ${STANDARD_INFLIGHT} chat completions in flight`),
      param: null,
    });
    // Another account of the same tier still gets in (queued behind the running one).
    const another = chat(other);
    await until(() => fleetState().queued === STANDARD_INFLIGHT, 10_000, "the other account's request to queue");
    ac.abort();
    await quietly(running.reader.read());
    await Promise.all(queued);
    expect((await another).status).toBe(200);
    await fleetIdle();
  }

  it("cap + 1 concurrent streams: the extra one is a 429 (queued requests count); places come back after completions and aborts", async () => {
    // Its own rpm so that only the in-flight cap binds here; the cap comes from the standard tier.
    const { token: key } = await scheduler.keys.create({ account: "capped", tier: "standard", rpm: 10_000 });
    const { token: other } = await scheduler.keys.create({ account: "capped-neighbour", tier: "standard", rpm: 10_000 });
    await expectFullCapThenRefused(key, other);

    for (let round = 0; round < 3; round++) {
      // Completed: non-streamed and streamed, the cap's worth at once.
      const done = await Promise.all(Array.from({ length: STANDARD_INFLIGHT }, (_, i) => chat(key, { stream: i % 2 === 1, max_tokens: 3 })));
      for (const r of done) expect(r.status).toBe(200);
      // Failed before they started: a bad body, a model no agent serves.
      expect((await chat(key, { temperature: 9 })).status).toBe(400);
      expect((await chat(key, { model: "famA4:405b" })).status).toBe(503);
      // Aborted while streaming.
      const streaming = new AbortController();
      const s = await openStream(key, 1800, streaming.signal);
      // Aborted while waiting in the queue (behind the stream), and a non-streamed one aborted while generating.
      const waiting = new AbortController();
      const queued = quietly(chat(key, {}, { signal: waiting.signal }));
      await until(() => fleetState().queued === 1, 10_000, "a request to queue");
      waiting.abort();
      await queued;
      streaming.abort();
      await quietly(s.reader.read());
      await fleetIdle();
      const generating = new AbortController();
      const answer = quietly(chat(key, { max_tokens: 1800 }, { signal: generating.signal }));
      await until(() => fleetState().inflight === 1, 10_000, "generation to start");
      generating.abort();
      await answer;
      // A stream read to its end.
      const full = await openStream(key, 8);
      expect(await readAll(full.reader)).toContain("data: [DONE]");
      await fleetIdle();
    }
    // After all that, the whole cap again, and not one more.
    await expectFullCapThenRefused(key, other);
  });
});

describe("n choices", () => {
  it("hold one of the account's places per choice: n above the cap is a 429, and every place comes back", async () => {
    const { token: key } = await scheduler.keys.create({ account: "choices", tier: "standard", rpm: 10_000 });
    const over = await chat(key, { n: STANDARD_INFLIGHT + 1 });
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe("too_many_requests_in_flight");
    // within the cap, but more choices than the agent's one slot: a 400 naming n
    const wide = await chat(key, { n: STANDARD_INFLIGHT });
    expect(wide.status).toBe(400);
    expect(wide.body.error).toMatchObject({ code: "invalid_n", param: "n" });
    // the places all came back: the whole cap at once still works
    const done = await Promise.all(Array.from({ length: STANDARD_INFLIGHT }, () => chat(key, { max_tokens: 2 })));
    for (const r of done) expect(r.status).toBe(200);
  });
});

describe("the fleet's queue serves accounts in turn", () => {
  it("a flood from one account does not delay another's request beyond the request running when it arrived", async () => {
    const a = (await scheduler.keys.create({ account: "flooder", tier: "pro" })).token;
    const b = (await scheduler.keys.create({ account: "neighbour", tier: "pro" })).token;
    const finished: string[] = [];
    const track = (name: string, p: Promise<{ status: number }>) =>
      p.then((r) => {
        expect(r.status, name).toBe(200);
        finished.push(name);
      });
    // A's first request generates (one sequence); its 9 others wait; then B's arrives.
    const ac = new AbortController();
    const first = await openStream(a, 1800, ac.signal);
    const flood = Array.from({ length: 9 }, (_, i) => track(`a${i + 2}`, chat(a, { max_tokens: 6, messages: user(`flood ${i}`) })));
    await until(() => fleetState().queued === 9, 10_000, "A's flood to queue");
    const neighbour = track("b1", chat(b, { max_tokens: 6 }));
    await until(() => fleetState().queued === 10, 10_000, "B's request to queue");
    // The running request ends (its client leaves); the freed slot goes to B, then A's flood resumes.
    ac.abort();
    await quietly(first.reader.read());
    await Promise.all([...flood, neighbour]);
    expect(finished).toEqual(["b1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10"]);
  });
});

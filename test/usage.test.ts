/**
 * Usage metering: every answered completion, embedding and transcription leaves a row in the
 * scheduler's ledger, `GET /v1/usage` adds them up per account by day and model (the tokens the
 * clients were told), another account sees none of it, and a scheduler killed outright keeps what
 * it had answered more than a second before.
 */
import { createLogger } from "../core/log.js";
import { openStore } from "../scheduler/store/index.js";
import type { UsageDay } from "../scheduler/usage/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, postChat, spawnScheduler, tempDir, waitForAgents } from "./helpers/fleet.js";
import { testDb } from "./helpers/db.js";
import { makeMedia, TEST_VAD, TEST_WHISPER_DIR } from "./helpers/speech.js";

const METRICS_TOKEN = "metrics-token-for-tests-0123";

async function usage(base: string, key: string, query = ""): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1/usage${query}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: await res.json() };
}

describe("GET /v1/usage", () => {
  let scheduler: SchedulerHandle;
  let agent: AgentHandle;
  let base: string;

  beforeAll(async () => {
    // the free tier's audio quota is tiny here: one transcription of a few seconds spends it
    scheduler = await inProcessScheduler({ metricsPerAccount: "true", metricsToken: METRICS_TOKEN, audioSecondsPerMinute: "free=2" });
    agent = await inProcessAgent(scheduler, { whisperDir: TEST_WHISPER_DIR, vadModel: TEST_VAD, asrParallel: "1", asrThreads: "1" });
    await waitForAgents(scheduler, 1);
    base = httpBase(scheduler);
  });
  afterAll(async () => {
    await agent?.close();
    await scheduler?.close();
  });

  it("adds up to the tokens and audio seconds the clients were told, by day and model, for the key's account only", async () => {
    const { token: key } = await scheduler.keys.create({ account: "metered", tier: "pro" });
    const { token: otherKey } = await scheduler.keys.create({ account: "stranger", tier: "pro" });
    const told = { prompt: 0, completion: 0, requests: 0 };
    for (const max_tokens of [4, 9]) {
      const res = await postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: `count to ${max_tokens}` }], max_tokens });
      expect(res.status).toBe(200);
      told.prompt += res.body.usage.prompt_tokens;
      told.completion += res.body.usage.completion_tokens;
      told.requests++;
    }
    // a streamed one, its usage in the last chunk
    const stream = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "stream" }], max_tokens: 5, stream: true, stream_options: { include_usage: true } }),
    });
    const chunks = (await stream.text())
      .split("\n\n")
      .filter((b) => b.startsWith("data: {"))
      .map((b) => JSON.parse(b.slice(6)));
    const last = chunks.at(-1)!.usage;
    told.prompt += last.prompt_tokens;
    told.completion += last.completion_tokens;
    told.requests++;
    // a transcription: its seconds
    const form = new FormData();
    form.append("model", "whisper-1");
    form.append("file", new Blob([new Uint8Array(await import("node:fs").then((fs) => fs.readFileSync(makeMedia(tempDir(), "a.mp3", { seconds: 4 }))))]), "a.mp3");
    const audio = await fetch(`${base}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    expect(audio.status).toBe(200);
    const seconds = ((await audio.json()) as { usage: { seconds: number } }).usage.seconds;

    const { status, body } = await usage(base, key);
    expect(status).toBe(200);
    expect(body.account).toBe("metered");
    const days = body.data as UsageDay[];
    const chat = days.filter((d) => d.model === MODEL_ID);
    expect(chat.reduce((n, d) => n + d.prompt_tokens, 0)).toBe(told.prompt);
    expect(chat.reduce((n, d) => n + d.completion_tokens, 0)).toBe(told.completion);
    expect(chat.reduce((n, d) => n + d.requests, 0)).toBe(told.requests);
    for (const d of chat) expect(d.total_tokens).toBe(d.prompt_tokens + d.completion_tokens);
    const whisper = days.find((d) => d.model === "whisper-1")!;
    expect(whisper.requests).toBe(1);
    expect(Math.ceil(whisper.audio_seconds)).toBe(seconds);
    expect(days.every((d) => d.date === new Date().toISOString().slice(0, 10))).toBe(true);

    expect((await usage(base, otherKey)).body.data).toEqual([]); // another account sees none of it

    // --metrics-per-account: the same figures as Prometheus counters labelled by account, to a scrape with the metrics token
    const metrics = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    const series = (name: string, labels: string) => Number(new RegExp(`^${name}\\{${labels},component="scheduler"\\} (\\S+)$`, "m").exec(metrics)?.[1]);
    expect(series("kiln_account_tokens_total", 'account="metered",kind="prompt"')).toBe(told.prompt);
    expect(series("kiln_account_tokens_total", 'account="metered",kind="completion"')).toBe(told.completion);
    expect(series("kiln_account_requests_total", 'account="metered",kind="chat"')).toBe(told.requests);
    expect(series("kiln_account_audio_seconds_total", 'account="metered"')).toBeCloseTo(whisper.audio_seconds, 2);
    expect(metrics).not.toContain('account="stranger"');
    expect(metrics).toContain("kiln_tokens_total{"); // the fleet-wide series beside them
  }, 60_000);

  it("holds transcription to the tier's audio seconds per minute: the request that crosses it is served, the next is a 429 with Retry-After", async () => {
    const { token: key } = await scheduler.keys.create({ account: "listener", tier: "free" });
    const bytes = new Uint8Array(await import("node:fs").then((fs) => fs.readFileSync(makeMedia(tempDir(), "q.mp3", { seconds: 4 }))));
    const transcribe = () => {
      const form = new FormData();
      form.append("model", "whisper-1");
      form.append("file", new Blob([bytes]), "q.mp3");
      return fetch(`${base}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    };
    const first = await transcribe();
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit-audio-seconds")).toBe("2");
    const charged = ((await first.json()) as { usage: { seconds: number } }).usage.seconds;
    expect(charged).toBeGreaterThan(2);
    const second = await transcribe();
    expect(second.status).toBe(429);
    expect(Number(second.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(((await second.json()) as { error: unknown }).error).toMatchObject({
      type: "rate_limit_error",
      code: "audio_quota_exceeded",
      message: expect.stringMatching(new RegExp(`^file: this account used ${Math.ceil(charged)} of its 2 audio seconds per minute`)),
    });
    // another tier's quota is its own (pro: the default, far above a few seconds)
    const { token: pro } = await scheduler.keys.create({ account: "listener-pro", tier: "pro" });
    const form = new FormData();
    form.append("model", "whisper-1");
    form.append("file", new Blob([bytes]), "q.mp3");
    expect((await fetch(`${base}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${pro}` }, body: form })).status).toBe(200);
  }, 60_000);

  it("serves no account's name or usage to a scrape without the metrics token, and refuses a wrong token with 401", async () => {
    const { token: key } = await scheduler.keys.create({ account: "private-acct", tier: "pro" });
    expect((await postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 2 })).status).toBe(200);
    const open = await fetch(`${base}/metrics`);
    expect(open.status).toBe(200);
    const text = await open.text();
    expect(text).toContain("kiln_tokens_total{"); // the fleet-wide series stay open to Prometheus
    expect(text).not.toContain("kiln_account_");
    expect(text).not.toContain("private-acct");
    for (const authorization of ["Bearer not-the-metrics-token-at-all", `Bearer ${key}`, "Basic eDp5"]) {
      const wrong = await fetch(`${base}/metrics`, { headers: { authorization } });
      expect(wrong.status, authorization).toBe(401);
      const body = await wrong.text();
      expect(JSON.parse(body).error, authorization).toMatchObject({ type: "authentication_error", code: "invalid_api_key", message: expect.stringMatching(/^Authorization:/) });
      expect(body).not.toContain("private-acct");
    }
    expect(await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()).toContain('account="private-acct"');
  });

  it("keeps per-account counters off unless asked: no kiln_account_ series by default", async () => {
    const plain = await inProcessScheduler();
    try {
      const { token } = await plain.keys.create({ account: "quiet", tier: "pro" });
      expect((await fetch(`${httpBase(plain)}/v1/models`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
      expect(await (await fetch(`${httpBase(plain)}/metrics`)).text()).not.toContain("kiln_account_");
    } finally {
      await plain.close();
    }
  });

  it("charges a completion whose client went away mid-stream the tokens generated before the agent stopped", async () => {
    const { token: key } = await scheduler.keys.create({ account: "walked-away", tier: "pro" });
    // every token forced to one that is not the end: the reply runs to max_tokens unless it is cut short
    const forced = await postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: "x" }], max_tokens: 1, temperature: 0 });
    expect(forced.status).toBe(200);
    const ac = new AbortController();
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      signal: ac.signal,
      body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "go on" }], max_tokens: 2000, stream: true, logit_bias: { "100": 100 } }),
    });
    const reader = res.body!.getReader();
    let seen = "";
    while (!/"content":"[^"]+"/.test(seen)) seen += new TextDecoder().decode((await reader.read()).value);
    ac.abort();
    let rows: UsageDay[] = [];
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      rows = (await usage(base, key)).body.data;
      if (rows.reduce((n, d) => n + d.requests, 0) === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const total = rows.reduce((n, d) => n + d.completion_tokens, 0) - forced.body.usage.completion_tokens;
    expect(rows.reduce((n, d) => n + d.requests, 0)).toBe(2);
    expect(total).toBeGreaterThan(0); // what it generated is charged…
    expect(total).toBeLessThan(2000); // …and it was cut short
  }, 30_000);

  it("refuses dates that are not days, a range backwards or longer than a year, naming the field", async () => {
    const { token: key } = await scheduler.keys.create({ account: "dates", tier: "free" });
    for (const [query, field] of [
      ["?start_date=2026-02-30", "start_date"],
      ["?end_date=yesterday", "end_date"],
      ["?start_date=2026-05-02&end_date=2026-05-01", "start_date"],
      ["?start_date=2024-01-01&end_date=2026-01-01", "start_date"],
    ] as const) {
      const { status, body } = await usage(base, key, query);
      expect(status, query).toBe(400);
      expect(body.error.param, query).toBe(field);
    }
    expect((await usage(base, key, "?start_date=2026-01-01&end_date=2026-01-31")).body).toEqual({
      object: "list",
      account: "dates",
      start_date: "2026-01-01",
      end_date: "2026-01-31",
      data: [],
    });
  });
});

describe("the ledger across a crash", () => {
  it("keeps the rows of requests answered more than a second before the scheduler was killed", async () => {
    const db = testDb();
    const scheduler = await spawnScheduler(db);
    const agent = await inProcessAgent({ grpc: { host: "127.0.0.1", port: scheduler.grpc } });
    try {
      const { execFileSync } = await import("node:child_process");
      const key = /key:\s+(\S+)/.exec(
        execFileSync(process.execPath, ["bin/kiln.js", "keys", "create", "--db", db, "--account", "crash", "--tier", "pro"], { encoding: "utf8" }),
      )![1]!;
      const base = `http://127.0.0.1:${scheduler.http}`;
      const deadline = Date.now() + 15_000;
      while (
        ((await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json())) as { models: { id: string; status: string }[] }).models.find(
          (m) => m.id === MODEL_ID,
        )?.status !== "available"
      ) {
        if (Date.now() > deadline) throw new Error("the agent never joined");
        await new Promise((r) => setTimeout(r, 100));
      }
      let completion = 0;
      for (let i = 0; i < 3; i++)
        completion += (await postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: `hi ${i}` }], max_tokens: 3 })).body.usage.completion_tokens;
      await new Promise((r) => setTimeout(r, 1500));
      await scheduler.proc.stop("SIGKILL");
      const store = await openStore(db, { logger: createLogger("test", "silent") });
      try {
        expect(await store.get("SELECT COUNT(*) AS n, SUM(completion_tokens) AS c FROM usage WHERE account = 'crash'")).toEqual({ n: 3, c: completion });
      } finally {
        await store.close();
      }
    } finally {
      await agent.close();
      await scheduler.proc.stop("SIGKILL");
    }
  }, 60_000);
});

describe("token quotas", () => {
  it("refuse an account's next request once its tokens per minute are spent, with the headers; other tiers and accounts go on", async () => {
    const scheduler = await inProcessScheduler({ tokensPerMinute: "free=40", tokensPerDay: "free=0" });
    const agent = await inProcessAgent(scheduler);
    try {
      await waitForAgents(scheduler, 1);
      const base = httpBase(scheduler);
      const { token: free } = await scheduler.keys.create({ account: "small", tier: "free" });
      const { token: pro } = await scheduler.keys.create({ account: "big", tier: "pro" });
      const body = { model: MODEL_ID, messages: [{ role: "user", content: "a prompt of more than five tokens, surely" }], max_tokens: 2 };
      const first = await postChat(base, free, body);
      expect(first.status).toBe(200);
      expect(first.headers.get("x-ratelimit-limit-tokens")).toBe("40");
      expect(first.headers.get("x-ratelimit-remaining-tokens")).toBe("40");
      // each request uses about half of the 40: within a few the minute is spent
      let refused: Awaited<ReturnType<typeof postChat>> | undefined;
      let used = first.body.usage.total_tokens as number;
      for (let i = 0; i < 5 && !refused; i++) {
        const res = await postChat(base, free, body);
        if (res.status === 429) refused = res;
        else used += res.body.usage.total_tokens;
      }
      expect(refused?.body.error.code).toBe("token_quota_exceeded");
      expect(Number(refused!.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(used).toBeLessThan(40 + first.body.usage.total_tokens); // refused once the quota could not hold the next one
      expect((await postChat(base, pro, body)).status).toBe(200); // no quota on pro by default
      expect((await postChat(base, pro, body)).status).toBe(200);
    } finally {
      await agent.close();
      await scheduler.close();
    }
  });

  it("count the day from the ledger: a restarted scheduler still refuses an account that spent its day", async () => {
    const db = testDb();
    const quotas = { db, tokensPerMinute: "free=0", tokensPerDay: "free=40" };
    const first = await inProcessScheduler(quotas);
    const agent = await inProcessAgent(first);
    const { token } = await first.keys.create({ account: "daily", tier: "free" });
    const body = { model: MODEL_ID, messages: [{ role: "user", content: "a prompt of more than five tokens, surely" }], max_tokens: 2 };
    try {
      await waitForAgents(first, 1);
      expect((await postChat(httpBase(first), token, body)).status).toBe(200);
      let status = 200;
      for (let i = 0; i < 5 && status === 200; i++) status = (await postChat(httpBase(first), token, body)).status;
      expect(status).toBe(429); // the day is spent
    } finally {
      await agent.close();
      await first.close();
    }
    const again = await inProcessScheduler(quotas);
    try {
      const res = await postChat(httpBase(again), token, body);
      expect(res.status).toBe(429);
      expect(res.body.error.code).toBe("token_quota_exceeded");
      expect(res.headers.get("x-ratelimit-limit-tokens-day")).toBe("40");
    } finally {
      await again.close();
    }
  });
});

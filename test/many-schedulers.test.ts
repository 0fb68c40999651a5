/**
 * Many schedulers, one fleet: two `kiln scheduler` processes share one PostgreSQL database and one
 * Redis, and one agent keeps a link to each. Requests through either are served by the agent,
 * whose slots are arbitrated between them; killing one scheduler mid-stream fails only its own
 * streams, while the other keeps serving and the agent stays linked to it; the usage ledger adds
 * up to what the clients were told on both. PostgreSQL and Redis are Debian's binaries, started
 * here on free ports; skipped visibly where either is absent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import { createLogger } from "../core/log.js";
import { KeyService } from "../scheduler/auth/index.js";
import { openStore } from "../scheduler/store/index.js";
import { createPostgresDatabase, postgresServerUrl } from "./helpers/db.js";
import { inProcessAgent, MODEL_ID, postChat, spawnScheduler, until, type KilnProcess } from "./helpers/fleet.js";
import { postgresBin, redisBin, startPostgres, startRedis, type Postgres, type RedisServer } from "./helpers/postgres.js";
import { SECRETS_KEY } from "./helpers/secrets.js";

const PG = postgresBin();
const REDIS = redisBin();

/** Reads an SSE stream to its end: the text, the finish reason, whether it ended with [DONE], and the usage. */
async function readStream(res: Response): Promise<{ text: string; finish: string | null; done: boolean; usage?: { prompt_tokens: number; completion_tokens: number } }> {
  const body = await res.text();
  const events = body
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => l.slice(6));
  const chunks = events
    .filter((e) => e !== "[DONE]")
    .map((e) => JSON.parse(e) as { choices: { delta: { content?: string }; finish_reason: string | null }[]; usage?: { prompt_tokens: number; completion_tokens: number } });
  return {
    text: chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""),
    finish: chunks.map((c) => c.choices[0]?.finish_reason).find((f) => f) ?? null,
    done: events.includes("[DONE]"),
    ...(chunks.find((c) => c.usage)?.usage ? { usage: chunks.find((c) => c.usage)!.usage! } : {}),
  };
}

describe.skipIf(!PG || !REDIS)("two schedulers on PostgreSQL and Redis, one agent linked to both", () => {
  let pg: Postgres;
  let redis: RedisServer;
  let db: string;
  const schedulers: { proc: KilnProcess; http: number; grpc: number }[] = [];
  let agent: AgentHandle;
  let key: string;
  const base = (i: number) => `http://127.0.0.1:${schedulers[i]!.http}`;
  /** Tokens the clients were told, by request. */
  const told: { prompt: number; completion: number }[] = [];

  beforeAll(async () => {
    [pg, redis] = await Promise.all([startPostgres(PG!), startRedis(REDIS!)]);
    db = createPostgresDatabase(postgresServerUrl(pg.port));
    for (let i = 0; i < 2; i++) schedulers.push(await spawnScheduler(db, {}, ["--redis", redis.url, "--secrets-key", SECRETS_KEY]));
    agent = await inProcessAgent({ grpc: { host: "127.0.0.1", port: 0 } }, { scheduler: schedulers.map((s) => `127.0.0.1:${s.grpc}`).join(","), sequences: "1" });
    const store = await openStore(db, { logger: createLogger("test", "silent") });
    key = (await (await KeyService.open(store)).create({ account: "fleet", tier: "pro" })).token;
    await store.close();
    await until(() => agent.links!.connected === 2, 15_000, "the agent to register with both schedulers");
  }, 90_000);
  afterAll(async () => {
    await agent?.close();
    for (const s of schedulers) await s.proc.stop("SIGKILL");
    redis?.stop();
    pg?.stop();
  });

  it("serves requests sent through either scheduler, its one slot arbitrated between them: the node never takes on more than it can run", async () => {
    const ask = (i: number, n: number) => postChat(base(i), key, { model: MODEL_ID, messages: [{ role: "user", content: `question ${n}` }], max_tokens: 24, temperature: 0 });
    // what the node took on at once, all links together (a node that queued work inside would hold more than its slot)
    let mostHeld = 0;
    const sampler = setInterval(() => {
      mostHeld = Math.max(
        mostHeld,
        agent.links!.links.reduce((n, l) => n + l.holds(agent.engine.modelPools[0]!), 0),
      );
    }, 1);
    const answers = await Promise.all([ask(0, 1), ask(1, 2), ask(0, 3), ask(1, 4), ask(1, 5), ask(0, 6)]).finally(() => clearInterval(sampler));
    expect(mostHeld).toBe(1);
    for (const a of answers) {
      expect(a.status, JSON.stringify(a.body)).toBe(200);
      expect(a.body.choices[0].message.content.length).toBeGreaterThan(0);
      told.push({ prompt: a.body.usage.prompt_tokens, completion: a.body.usage.completion_tokens });
    }
  });

  it("a scheduler killed mid-stream fails only its own stream; the other's runs to its end, and the agent stays linked to it", async () => {
    const open = (i: number) =>
      fetch(`${base(i)}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: MODEL_ID,
          messages: [{ role: "user", content: "tell me a long story" }],
          max_tokens: 1500,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
    await new Promise((r) => setTimeout(r, 1500)); // A's ledger rows so far are written (every second) before A is killed
    // one slot: the stream through B runs first; the one through A waits in A's queue for the slot
    const survivor = await open(1);
    const reader = survivor.body!.getReader();
    let head = "";
    while (head.split("data:").length < 3) head += new TextDecoder().decode((await reader.read()).value);
    // its outcome, caught from the start: the request may fail before or after its headers, while A is being killed
    const doomed = open(0)
      .then((r) => r.text())
      .then(
        () => "completed",
        (err: unknown) => err,
      );
    await new Promise((r) => setTimeout(r, 300));
    await schedulers[0]!.proc.stop("SIGKILL");
    expect(await doomed).toBeInstanceOf(Error); // its connection went with its scheduler
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    const whole = await readStream(new Response(head + rest));
    expect(whole.done).toBe(true);
    expect(whole.finish).toMatch(/^(stop|length)$/);
    expect(whole.usage!.completion_tokens).toBeGreaterThan(0);
    told.push({ prompt: whole.usage!.prompt_tokens, completion: whole.usage!.completion_tokens });
    // the agent: linked to B still, reconnecting to A
    const [toA, toB] = agent.links!.links;
    expect(toB!.state).toBe("connected");
    expect(toA!.state).not.toBe("connected");
    expect((await fetch(`http://127.0.0.1:${agent.http.port}/readyz`)).status).toBe(200); // ready: it serves through B
    const node = (await (await fetch(`http://127.0.0.1:${agent.http.port}/api/node`)).json()) as { schedulers: { address: string; state: string }[] };
    expect(node.schedulers.map((s) => s.state)).toEqual([toA!.state, "connected"]); // the node panel shows each link
    const after = await postChat(base(1), key, { model: MODEL_ID, messages: [{ role: "user", content: "still there?" }], max_tokens: 8 });
    expect(after.status).toBe(200);
    told.push({ prompt: after.body.usage.prompt_tokens, completion: after.body.usage.completion_tokens });
  }, 60_000);

  it("the usage ledger, shared by both, adds up to the tokens the clients were told through either", async () => {
    await new Promise((r) => setTimeout(r, 1500)); // the survivor's buffered rows are written every second
    const res = await fetch(`${base(1)}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const report = (await res.json()) as { data: { model: string; requests: number; prompt_tokens: number; completion_tokens: number }[] };
    const rows = report.data.filter((d) => d.model === MODEL_ID);
    const sum = (f: (d: (typeof rows)[number]) => number) => rows.reduce((n, d) => n + f(d), 0);
    // the stream through the killed scheduler was cancelled with it: A could not write its row, and no client was told of it
    expect(sum((d) => d.requests)).toBe(told.length);
    expect(sum((d) => d.prompt_tokens)).toBe(told.reduce((n, t) => n + t.prompt, 0));
    expect(sum((d) => d.completion_tokens)).toBe(told.reduce((n, t) => n + t.completion, 0));
  });
});

if (!PG || !REDIS)
  describe.skip("two schedulers on PostgreSQL and Redis (skipped: needs Debian's postgresql and redis-server)", () => {
    it("many schedulers", () => undefined);
  });

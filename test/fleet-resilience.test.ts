/**
 * The fleet under failure, with real `kiln` processes: an agent killed mid-stream, a scheduler
 * restarted, an agent with a wrong token.
 */
import { createLogger } from "../core/log.js";
import { afterEach, describe, expect, it } from "vitest";
import type { SchedulerHandle } from "../scheduler/index.js";
import { KeyService } from "../scheduler/auth/index.js";
import { openStore } from "../scheduler/store/index.js";
import { testDb } from "./helpers/db.js";
import type { AgentHandle } from "../agent/index.js";
import {
  httpBase,
  inProcessAgent,
  inProcessScheduler,
  MODEL_ID,
  NODE_TOKEN,
  postChat,
  spawnAgent,
  spawnScheduler,
  until,
  waitForAgents,
  type KilnProcess,
} from "./helpers/fleet.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** A long greedy stream: deterministic, so it cannot sample the end-of-turn token early and finish first. */
function openStream(base: string, key: string, maxTokens: number): Promise<Response> {
  return fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "tell me a long story" }], max_tokens: maxTokens, temperature: 0, stream: true }),
  });
}

describe("agent lost mid-flight", () => {
  it("SIGKILL mid-stream: the client gets an error event within 5 s; a second agent serves the queued requests", async () => {
    const scheduler: SchedulerHandle = await inProcessScheduler();
    cleanups.push(() => scheduler.close());
    const base = httpBase(scheduler);
    const key = (await scheduler.keys.create({ account: "t", tier: "pro" })).token;

    const agents: Record<string, KilnProcess> = {
      "node-a": spawnAgent(scheduler.grpc.port, "node-a", ["--sequences", "1"]),
      "node-b": spawnAgent(scheduler.grpc.port, "node-b", ["--sequences", "1"]),
    };
    for (const p of Object.values(agents)) cleanups.push(() => p.stop("SIGKILL"));
    await waitForAgents(scheduler, 2);

    // The first long stream takes one node; wait for its text, then see which node has it.
    const doomed = await openStream(base, key, 2000);
    const reader = doomed.body!.getReader();
    const decoder = new TextDecoder();
    let seen = "";
    while (seen.split("data:").length < 3) seen += decoder.decode((await reader.read()).value);
    const victim = scheduler.fleet.snapshot().find((s) => s.pools[0]!.inflight === 1)!.nodeId;

    // The other node gets a long request of its own (the whole context: ~0.6 s on an idle machine, where
    // 300 tokens took 80 ms and a loaded CI machine's two queued requests arrived after it had ended); two
    // more wait in the queue.
    const onSurvivor = postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: "tell me a long story" }], max_tokens: 2000, temperature: 0 });
    await until(() => scheduler.fleet.snapshot().every((s) => s.pools[0]!.inflight === 1), 5000, "both agents busy");
    const queued = [1, 2].map((i) => postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: `q${i}` }], max_tokens: 8 }));
    await until(() => scheduler.fleet.queued === 2, 5000, "two queued requests");

    const killedAt = Date.now();
    agents[victim]!.child.kill("SIGKILL");
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += decoder.decode(value);
    }
    expect(Date.now() - killedAt).toBeLessThan(5000);
    const lastEvent = JSON.parse(
      rest
        .trim()
        .split("\n\n")
        .at(-1)!
        .replace(/^data: /, ""),
    );
    expect(lastEvent.error).toMatchObject({ type: "upstream_error", code: "agent_lost" });
    expect(rest).not.toContain("[DONE]");
    // a stream that could not be saved is counted
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^kiln_completions_failed_total\\{[^}]*model="${MODEL_ID}"[^}]*code="agent_lost"[^}]*\\} 1$`, "m"));

    for (const r of [await onSurvivor, ...(await Promise.all(queued))]) {
      expect(r.status).toBe(200);
      expect(["stop", "length"]).toContain(r.body.choices[0].finish_reason); // random weights may sample <|im_end|>
    }
  });
});

describe("scheduler restart", () => {
  it("agents rejoin a restarted scheduler and serve again", async () => {
    const db = testDb();
    let sched = await spawnScheduler(db);
    const ports = { http: sched.http, grpc: sched.grpc };
    cleanups.push(() => sched.proc.stop("SIGKILL"));
    const agent = spawnAgent(ports.grpc, "node-r");
    cleanups.push(() => agent.stop("SIGKILL"));
    await agent.waitFor(/registered with the scheduler/);

    const store = await openStore(db, { logger: createLogger("test", "silent") });
    const key = (await (await KeyService.open(store)).create({ account: "r", tier: "pro" })).token;
    await store.close();
    const base = `http://127.0.0.1:${ports.http}`;
    expect((await postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 4 })).status).toBe(200);

    await sched.proc.stop("SIGKILL");
    await agent.waitFor(/reconnecting/);
    sched = await spawnScheduler(db, ports);
    const registrations = () => agent.lines.filter((l) => l.includes("registered with the scheduler")).length;
    await until(() => registrations() === 2, 15_000, "the agent to register again");
    // The key survives the restart (same database, same signing secret).
    const res = await postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: "hi again" }], max_tokens: 4 });
    expect(res.status).toBe(200);
    // No secret ever reaches a log line: node token, API key, signing secret.
    const logs = [...agent.lines, ...sched.proc.lines].join("\n");
    expect(logs).toContain("registered with the scheduler");
    for (const secret of [NODE_TOKEN, key]) expect(logs).not.toContain(secret);
  });
});

describe("node tokens", () => {
  it("an agent with an unknown token is refused and never joins", async () => {
    const scheduler = await inProcessScheduler();
    cleanups.push(() => scheduler.close());
    let agent: AgentHandle | undefined;
    const states: string[] = [];
    agent = await inProcessAgent(scheduler, { nodeToken: "definitely-not-a-known-token" });
    cleanups.push(() => agent!.close());
    agent.links!.links[0]!.on("state", (s) => states.push(s));
    await until(() => states.includes("disconnected"), 5000, "the refusal");
    expect(scheduler.fleet.snapshot()).toHaveLength(0);
  });

  it("the agent reconnects with capped, jittered backoff", async () => {
    const { Backoff } = await import("../agent/link/index.js");
    const b = new Backoff(100, 1000, () => 1);
    expect([b.next(), b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([100, 200, 400, 800, 1000, 1000]);
    const low = new Backoff(100, 1000, () => 0);
    expect([low.next(), low.next()]).toEqual([50, 100]);
  });
});

/**
 * SIGTERM drains: the agent stops taking work and tells the scheduler, a completion in flight
 * finishes within the deadline, then the process exits cleanly.
 */
import { execFileSync } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { MODEL_ID, NODE_TOKEN, postChat, spawnAgent, spawnScheduler, until, type KilnProcess } from "./helpers/fleet.js";
import { testDb } from "./helpers/db.js";

const procs: KilnProcess[] = [];
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop("SIGKILL")));
});

describe("drain on SIGTERM", () => {
  it("lets a streamed completion finish, refuses new work meanwhile, then exits 0", async () => {
    const db = testDb();
    const sched = await spawnScheduler(db);
    procs.push(sched.proc);
    const base = `http://127.0.0.1:${sched.http}`;
    const agent = spawnAgent(sched.grpc, "node-drain", ["--sequences", "2", "--drain-seconds", "20"]);
    procs.push(agent);
    await agent.waitFor(/registered with the scheduler/);
    const created = execFileSync(process.execPath, ["bin/kiln.js", "keys", "create", "--db", db, "--account", "d", "--tier", "pro"], { encoding: "utf8" });
    const key = /key:\s+(\S+)/.exec(created.split("\n")[1]!)![1]!;

    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      // the whole context greedily (~0.5 s): it still streams while the drain is told and new work refused
      body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "tell me a long story" }], max_tokens: 2000, temperature: 0, stream: true }),
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value);
    while (text.split("data:").length < 4) text += decoder.decode((await reader.read()).value);

    agent.child.kill("SIGTERM");
    await agent.waitFor(/shutting down/);
    // The scheduler is told the node drains (a break that never tells it fails here), then refuses
    // new work while the node's completion still streams, not because the node has left the fleet.
    await sched.proc.waitFor(/"msg":"agent draining"/, 5000);
    let refused: { status: number; body: any } | undefined;
    await until(
      async () => {
        const r = await postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: "new work" }], max_tokens: 4 });
        if (r.status === 503) refused = r;
        return r.status === 503;
      },
      5000,
      "new work to be refused while draining",
    );
    expect(sched.proc.lines.some((l) => l.includes('"msg":"agent left"'))).toBe(false);
    expect(refused!.body.error).toMatchObject({ type: "service_unavailable_error", code: "model_unavailable" });

    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text.trim().endsWith("data: [DONE]"), text.slice(-400)).toBe(true);
    expect(text).toContain('"finish_reason":"length"');
    expect(await agent.exited).toBe(0);

    // The HTTP request id travelled to the agent's log line for this completion.
    const requestId = res.headers.get("x-request-id")!;
    expect(agent.lines.some((l) => l.includes('"msg":"completion done"') && l.includes(`"requestId":"${requestId}"`))).toBe(true);
    // No secret in any log line of either process.
    for (const line of [...agent.lines, ...sched.proc.lines]) {
      expect(line).not.toContain(NODE_TOKEN);
      expect(line).not.toContain(key);
    }
  }, 60_000);
});

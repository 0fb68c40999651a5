/**
 * Routing rules of the Fleet, driven through its agent-side interface with recording links
 * (the gRPC edge and real agents are covered by test/fleet-resilience.test.ts).
 */
import { describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import type { SchedulerMessage } from "../../proto/index.js";
import { Fleet, type FleetOptions } from "./fleet.js";
import type { AgentLink, CompletionEvent } from "./types.js";
import { heartbeat as beat, RecordingLink, servingNode } from "../../test/helpers/recording-link.js";

const register = (nodeId: string, slots: number, capabilities: string[] = []) => servingNode(nodeId, slots, { capabilities });

const fleet = (options: Partial<FleetOptions> = {}) => new Fleet({ queueSize: 2, queueTimeoutMs: 5000, heartbeatMs: 60_000, logger: createLogger("test", "silent"), ...options });
const request = { model: "famB-v3.1", messages: [{ role: "user" as const, content: "hi" }] };

async function drain(events: AsyncIterable<CompletionEvent>): Promise<CompletionEvent[]> {
  const out: CompletionEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe("Fleet routing", () => {
  it("picks the least-loaded pool (by its share of slots in use) and queues when every slot is busy", () => {
    const f = fleet();
    const a = new RecordingLink(),
      b = new RecordingLink();
    f.attach(register("a", 4), a);
    f.attach(register("b", 1), b);
    f.submit(request); // a: 0/4 and b: 0/1 tie → a
    f.submit(request); // a: 1/4 in use, b: 0/1 → b (a first-free-slot rule would pick a again)
    expect([a.requests().length, b.requests().length]).toEqual([1, 1]);
    f.submit(request); // b is full → a
    f.submit(request);
    f.submit(request);
    expect([a.requests().length, b.requests().length]).toEqual([4, 1]);
    f.submit(request);
    expect(f.queued).toBe(1);
    f.close();
  });

  it("counts the slots an agent's own work holds (heartbeat local_busy_slots) as busy, and sends waiting work when they come back", () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 2), a);
    const heartbeat = (local: number[]) => beat(f, "a", a, local);
    heartbeat([1]); // a translation holds one of the two slots
    f.submit(request);
    f.submit(request);
    expect(a.requests()).toHaveLength(1);
    expect(f.queued).toBe(1);
    expect(f.snapshot()[0]!.pools[0]).toMatchObject({ slots: 2, inflight: 1, local: 1 });
    heartbeat([0]);
    expect(a.requests()).toHaveLength(2);
    expect(f.queued).toBe(0);
    f.close();
  });

  it("passes each piece of a batched chunks message to its own request, in order", async () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 2), a);
    const first = drain(f.submit(request)),
      second = drain(f.submit(request));
    const [x, y] = a.requests();
    f.receive("a", a, { body: "chunk", chunk: { request_id: x!, text: "Once", logprobs: [], index: 0, tool_calls: [] } });
    f.receive("a", a, {
      body: "chunks",
      chunks: {
        chunks: [
          { request_id: y!, text: "Hello", logprobs: [], index: 0, tool_calls: [] },
          { request_id: x!, text: " upon", logprobs: [], index: 0, tool_calls: [] },
          { request_id: "gone", text: "lost", logprobs: [], index: 0, tool_calls: [] },
        ],
      },
    });
    for (const id of [x!, y!])
      f.receive("a", a, {
        body: "done",
        done: { request_id: id, finish_reason: "length", usage: { prompt_tokens: 1, completion_tokens: 2, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
      });
    const done = { type: "done", finishReason: "length", promptTokens: 1, completionTokens: 2, finishReasons: ["length"], cachedTokens: 0, fingerprint: "fp_test" };
    expect(await first).toEqual([{ type: "text", text: "Once", index: 0 }, { type: "text", text: " upon", index: 0 }, done]);
    expect(await second).toEqual([{ type: "text", text: "Hello", index: 0 }, done]);
    f.close();
  });

  it("sends a request only to a pool with every capability it needs: an older agent never drops a field it does not know", () => {
    const f = fleet();
    const old = new RecordingLink(),
      current = new RecordingLink();
    f.attach(register("old", 4), old);
    const seeded = { ...request, sampling: { seed: 1 } };
    const json = { ...request, responseFormat: { type: "json_object" as const } };
    expect(() => f.submit(seeded)).toThrow(
      expect.objectContaining({ status: 503, code: "model_unavailable", message: expect.stringMatching(/supports sampling \(older agents\)/) }),
    );
    expect(() => f.submit(json)).toThrow(expect.objectContaining({ status: 503, message: expect.stringMatching(/supports response_format/) }));
    const withTools = { ...request, tools: [{ name: "f" }] };
    const answering = {
      ...request,
      messages: [
        { role: "assistant" as const, content: "", toolCalls: [{ id: "c", name: "f", arguments: "{}" }] },
        { role: "tool" as const, content: "1", toolCallId: "c" },
      ],
    };
    for (const r of [withTools, answering]) expect(() => f.submit(r)).toThrow(expect.objectContaining({ status: 503, message: expect.stringMatching(/supports tools/) }));
    f.submit(request); // plain chat still goes to the old agent
    expect(old.requests()).toHaveLength(1);
    f.attach(register("current", 1, ["sampling", "response_format"]), current);
    f.submit(seeded);
    f.submit(json); // the capable agent's one slot is busy: it waits for it, not for the old agent's free slots
    expect([old.requests().length, current.requests().length, f.queued]).toEqual([1, 1, 1]);
    f.close();
  });

  it("tells the agent an opaque cache scope per account: the same for one account, another for another, never the name", () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 4), a);
    for (const account of ["alice", "alice", "bob"]) f.submit({ ...request, account });
    const scopes = a.sent.filter((m) => m.completion).map((m) => m.completion!.cache_scope!);
    expect(scopes[0]).toBe(scopes[1]);
    expect(scopes[2]).not.toBe(scopes[0]);
    for (const scope of scopes) expect(scope).toMatch(/^[\w-]{22}$/);
    expect(scopes.join()).not.toMatch(/alice|bob/);
    f.close();
  });

  it("a request for n choices holds n slots of one pool: it waits for n free ones, and more than any pool has is a 400", () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 4, ["n"]), a);
    f.submit({ ...request, n: 3 });
    expect(f.snapshot()[0]!.pools[0]!.inflight).toBe(3);
    f.submit({ ...request, n: 2 }); // one slot left: it waits
    expect([a.requests().length, f.queued]).toEqual([1, 1]);
    expect(a.sent[0]!.completion!.n).toBe(3);
    expect(() => f.submit({ ...request, n: 5 })).toThrow(expect.objectContaining({ status: 400, code: "invalid_n", field: "n" }));
    f.receive("a", a, { body: "done", done: { request_id: a.requests()[0]!, finish_reason: "stop", usage: null, finish_reasons: ["stop", "stop", "length"], stop_text: "" } });
    expect([a.requests().length, f.queued, f.snapshot()[0]!.pools[0]!.inflight]).toEqual([2, 0, 2]);
    f.close();
  });

  it("a waiting request for n choices keeps its model's freed slots until it fits: single-slot requests do not starve it", () => {
    const f = fleet({ queueSize: 10 });
    const a = new RecordingLink();
    f.attach(register("a", 3, ["n"]), a);
    for (const account of ["x1", "x2", "x3"]) f.submit({ ...request, account }); // every slot busy
    f.submit({ ...request, n: 2, account: "y" }); // needs two: waits
    f.submit({ ...request, account: "z" }); // waits behind it
    const finish = (i: number) =>
      f.receive("a", a, { body: "done", done: { request_id: a.requests()[i]!, finish_reason: "stop", usage: null, finish_reasons: [], stop_text: "" } });
    finish(0); // one slot free: too few for y, and kept for it rather than given to z
    expect([a.requests().length, f.queued]).toEqual([3, 2]);
    finish(1); // two free: y
    expect(a.sent.filter((m) => m.completion).map((m) => m.completion!.n || 1)).toEqual([1, 1, 1, 2]);
    finish(2); // then z
    expect([a.requests().length, f.queued]).toEqual([5, 0]);
    f.close();
  });

  it("n that only a draining agent could run is a 503 (try again), not the request's fault", () => {
    const f = fleet();
    const wide = new RecordingLink(),
      narrow = new RecordingLink();
    f.attach(register("wide", 4, ["n"]), wide);
    f.attach(register("narrow", 1, ["n"]), narrow);
    f.receive("wide", wide, { body: "draining", draining: { deadline_ms: 1000 } });
    expect(() => f.submit({ ...request, n: 3 })).toThrow(expect.objectContaining({ status: 503 }));
    f.close();
  });

  it("a request with no text yet moves to another agent when its agent is lost", async () => {
    const f = fleet();
    const a = new RecordingLink(),
      b = new RecordingLink();
    f.attach(register("a", 1), a);
    const events = drain(f.submit(request));
    const [id] = a.requests();
    f.attach(register("b", 1), b);
    f.detach("a", a, "killed");
    expect(b.requests()).toEqual([id]);
    f.receive("b", b, { body: "chunk", chunk: { request_id: id!, text: "hello", logprobs: [], index: 0, tool_calls: [] } });
    f.receive("b", b, {
      body: "done",
      done: { request_id: id!, finish_reason: "stop", usage: { prompt_tokens: 3, completion_tokens: 1, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
    });
    expect(await events).toEqual([
      { type: "text", text: "hello", index: 0 },
      { type: "done", finishReason: "stop", promptTokens: 3, completionTokens: 1, finishReasons: ["stop"], cachedTokens: 0, fingerprint: "fp_test" },
    ]);
    f.close();
  });

  it("a request that already streamed text ends with a 502 when its agent is lost", async () => {
    const f = fleet();
    const a = new RecordingLink(),
      b = new RecordingLink();
    f.attach(register("a", 1), a);
    f.attach(register("b", 1), b);
    const events = drain(f.submit(request));
    const owner = a.requests().length ? a : b;
    const id = owner.requests()[0]!;
    f.receive(owner === a ? "a" : "b", owner, { body: "chunk", chunk: { request_id: id, text: "partial", logprobs: [], index: 0, tool_calls: [] } });
    f.detach(owner === a ? "a" : "b", owner, "killed");
    await expect(events).rejects.toMatchObject({ status: 502, code: "agent_lost" });
    expect((owner === a ? b : a).requests()).toHaveLength(0);
    f.close();
  });

  it("a retryable agent error before any text retries elsewhere; attempts are bounded", async () => {
    const f = fleet({ queueSize: 4, maxAttempts: 2 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const events = drain(f.submit(request));
    for (let i = 0; i < 2; i++) {
      const id = a.requests().at(-1)!;
      f.receive("a", a, { body: "error", error: { request_id: id, code: "draining", message: "draining", retryable: true, usage: null } });
    }
    await expect(events).rejects.toMatchObject({ status: 502, code: "agents_failed" });
    f.close();
  });

  it("a retryable error sends the request to another node, not back to the one that failed", async () => {
    const f = fleet({ queueSize: 4, maxAttempts: 3 });
    const a = new RecordingLink(),
      b = new RecordingLink();
    f.attach(register("a", 1), a);
    f.attach(register("b", 1), b);
    const events = drain(f.submit(request));
    expect([a.requests().length, b.requests().length]).toEqual([1, 0]); // a tie: the first node
    f.receive("a", a, { body: "error", error: { request_id: a.requests()[0]!, code: "draining", message: "draining", retryable: true, usage: null } });
    // a's slot is free again and as loaded as b's, yet the retry goes to b.
    expect([a.requests().length, b.requests().length]).toEqual([1, 1]);
    const id = b.requests()[0]!;
    f.receive("b", b, { body: "chunk", chunk: { request_id: id, text: "ok", logprobs: [], index: 0, tool_calls: [] } });
    f.receive("b", b, {
      body: "done",
      done: { request_id: id, finish_reason: "stop", usage: { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
    });
    expect((await events).map((e) => e.type)).toEqual(["text", "done"]);
    f.close();
  });

  it("a request that failed on every node serving its model may go back to one of them", async () => {
    const f = fleet({ queueSize: 4, maxAttempts: 3 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const events = drain(f.submit(request));
    f.receive("a", a, { body: "error", error: { request_id: a.requests()[0]!, code: "draining", message: "draining", retryable: true, usage: null } });
    expect(a.requests()).toHaveLength(2);
    const id = a.requests()[1]!;
    f.receive("a", a, {
      body: "done",
      done: { request_id: id, finish_reason: "stop", usage: { prompt_tokens: 1, completion_tokens: 0, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
    });
    expect((await events).map((e) => e.type)).toEqual(["done"]);
    f.close();
  });

  it("a node busy with another scheduler's work (node_busy, after a heartbeat saying so) queues the request without spending an attempt, and sends it when the slot is free", async () => {
    const f = fleet({ queueSize: 4, maxAttempts: 1 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const heartbeat = (local: number[]) => beat(f, "a", a, local);
    const events = drain(f.submit(request));
    expect(a.requests()).toHaveLength(1);
    heartbeat([1]); // the other scheduler's completion holds the one slot
    f.receive("a", a, { body: "error", error: { request_id: a.requests()[0]!, code: "node_busy", message: "taken", retryable: true, usage: null } });
    expect(a.requests()).toHaveLength(1); // not sent straight back: it waits
    expect(f.queued).toBe(1);
    heartbeat([0]); // freed
    expect(a.requests()).toHaveLength(2); // sent again; with maxAttempts 1, the refusal spent no attempt
    const id = a.requests()[1]!;
    f.receive("a", a, {
      body: "done",
      done: { request_id: id, finish_reason: "stop", usage: { prompt_tokens: 1, completion_tokens: 0, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
    });
    expect((await events).map((e) => e.type)).toEqual(["done"]);
    f.close();
  });

  it("busy refusals are bounded: past 20 they count as failed attempts, so two schedulers that disagree cannot bounce a request for ever", async () => {
    const f = fleet({ queueSize: 4, maxAttempts: 1 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const events = drain(f.submit(request));
    for (let i = 0; i < 21; i++)
      f.receive("a", a, { body: "error", error: { request_id: a.requests().at(-1)!, code: "node_busy", message: "taken", retryable: true, usage: null } });
    expect(a.requests()).toHaveLength(21); // sent back each time (no heartbeat said the slot was taken)
    await expect(events).rejects.toMatchObject({ status: 502, code: "agents_failed" });
    f.close();
  });

  it("a request a busy node sent back keeps its first queue deadline: the waits add up to --queue-timeout", async () => {
    const f = fleet({ queueSize: 4, queueTimeoutMs: 300 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const heartbeat = (local: number[]) => beat(f, "a", a, local);
    const started = Date.now();
    const events = drain(f.submit(request));
    const outcome = events.then(
      () => ({ at: Date.now() }),
      (err: unknown) => ({ err, at: Date.now() }),
    );
    for (let i = 0; i < 3; i++) {
      heartbeat([1]);
      f.receive("a", a, { body: "error", error: { request_id: a.requests().at(-1)!, code: "node_busy", message: "taken", retryable: true, usage: null } });
      await new Promise((r) => setTimeout(r, 120));
      heartbeat([0]); // sent again, refused again
    }
    const { err, at } = (await outcome) as { err?: unknown; at: number };
    expect(err).toMatchObject({ status: 503, code: "queue_timeout" });
    // three waits of 120 ms in a 300 ms deadline: the third one ends it (at ~300 ms; a deadline
    // renewed at each resend would end at ~660 ms; the margin is for a loaded machine's late timers)
    expect(at - started).toBeLessThan(600);
    f.close();
  });

  it("queued requests time out with a 503; the queue is bounded", async () => {
    const f = fleet({ queueTimeoutMs: 100 });
    f.attach(register("a", 1), new RecordingLink());
    f.submit(request);
    const waiting = drain(f.submit(request));
    f.submit(request);
    await expect(drain(f.submit(request))).rejects.toMatchObject({ status: 503, code: "queue_full" });
    await expect(waiting).rejects.toMatchObject({ status: 503, code: "queue_timeout" });
    f.close();
  });

  it("cancelling sends Cancel and holds the slot until the agent confirms", async () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const ac = new AbortController();
    f.submit(request, ac.signal);
    const id = a.requests()[0]!;
    ac.abort();
    expect(a.sent.at(-1)).toEqual({ cancel: { request_id: id } });
    f.submit(request);
    expect(a.requests()).toHaveLength(1); // still held
    f.receive("a", a, { body: "error", error: { request_id: id, code: "cancelled", message: "cancelled", retryable: false, usage: null } });
    expect(a.requests()).toHaveLength(2); // freed and given to the queued one
    f.close();
  });

  it("tells a request's usage once: with its done, or with the agent's answer to its cancel, never for a failure", async () => {
    const f = fleet({ queueSize: 8 });
    const a = new RecordingLink();
    f.attach(register("a", 4), a);
    const told: string[] = [];
    const onUsage = (name: string) => (u: { promptTokens: number; completionTokens: number }) => told.push(`${name} ${u.promptTokens}+${u.completionTokens}`);
    const usage = (p: number, c: number) => ({ prompt_tokens: p, completion_tokens: c, cached_tokens: 0 });

    const done = drain(f.submit({ ...request, onUsage: onUsage("done") }));
    f.receive("a", a, { body: "done", done: { request_id: a.requests()[0]!, finish_reason: "stop", usage: usage(7, 3), finish_reasons: [], stop_text: "" } });
    await done;

    const ac = new AbortController();
    f.submit({ ...request, onUsage: onUsage("cancelled") }, ac.signal);
    ac.abort();
    f.receive("a", a, { body: "error", error: { request_id: a.requests()[1]!, code: "cancelled", message: "cancelled", retryable: false, usage: usage(7, 42) } });

    const failed = drain(f.submit({ ...request, onUsage: onUsage("failed") })).catch(() => undefined);
    f.receive("a", a, { body: "error", error: { request_id: a.requests()[2]!, code: "engine_error", message: "boom", retryable: false, usage: usage(7, 5) } });
    await failed;

    expect(told).toEqual(["done 7+3", "cancelled 7+42"]);
    f.close();
  });

  it("an agent silent for 3 heartbeat intervals is dropped and its stream closed", async () => {
    const f = fleet({ heartbeatMs: 50 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    await new Promise((r) => setTimeout(r, 400));
    expect(f.snapshot()).toHaveLength(0);
    expect(a.closed).toBe("no heartbeat");
    f.close();
  });

  it("heartbeats keep an agent registered", async () => {
    const f = fleet({ heartbeatMs: 50 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const beat = setInterval(() => f.receive("a", a, { body: "heartbeat", heartbeat: null }), 40);
    await new Promise((r) => setTimeout(r, 400));
    clearInterval(beat);
    expect(f.snapshot()).toHaveLength(1);
    f.close();
  });

  it("a draining agent gets no new work", () => {
    const f = fleet();
    const a = new RecordingLink(),
      b = new RecordingLink();
    f.attach(register("a", 4), a);
    f.attach(register("b", 4), b);
    f.receive("a", a, { body: "draining", draining: { deadline_ms: 1000 } });
    for (let i = 0; i < 3; i++) f.submit(request);
    expect(a.requests()).toHaveLength(0);
    expect(b.requests()).toHaveLength(3);
    f.receive("b", b, { body: "draining", draining: { deadline_ms: 1000 } });
    expect(() => f.submit(request)).toThrow(/no connected agent serves/);
    f.close();
  });

  it("a second registration with the same node id replaces the first stream", async () => {
    const f = fleet();
    const old = new RecordingLink(),
      fresh = new RecordingLink();
    f.attach(register("a", 1), old);
    const events = drain(f.submit(request));
    f.attach(register("a", 1), fresh);
    expect(old.closed).toMatch(/replaced/);
    expect(f.snapshot()).toHaveLength(1);
    // The request had no text yet: it moved to the new stream; the old stream's stragglers are ignored.
    const id = fresh.requests()[0]!;
    f.receive("a", old, { body: "done", done: { request_id: id, finish_reason: "stop", usage: null, finish_reasons: [], stop_text: "" } });
    f.receive("a", fresh, {
      body: "done",
      done: { request_id: id, finish_reason: "length", usage: { prompt_tokens: 1, completion_tokens: 2, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
    });
    expect(await events).toEqual([
      { type: "done", finishReason: "length", promptTokens: 1, completionTokens: 2, finishReasons: ["length"], cachedTokens: 0, fingerprint: "fp_test" },
    ]);
    f.close();
  });
});

/**
 * Routing rules of the Fleet, driven through its agent-side interface with recording links
 * (the gRPC edge and real agents are covered by test/fleet-resilience.test.ts).
 */
import { describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import type { Register__Output, SchedulerMessage } from "../../proto/index.js";
import { Fleet } from "./fleet.js";
import type { AgentLink, CompletionEvent } from "./types.js";

class RecordingLink implements AgentLink {
  sent: SchedulerMessage[] = [];
  closed?: string;
  send(m: SchedulerMessage): void { this.sent.push(m); }
  close(reason: string): void { this.closed = reason; }
  requests(): string[] { return this.sent.filter((m) => m.completion).map((m) => m.completion!.request_id!); }
}

const register = (nodeId: string, slots: number): Register__Output => ({
  node_id: nodeId, agent_version: "test", hardware: null,
  pools: [{ model_ids: ["famB-v3.1"], slots, context_size: 2048 }],
});

const fleet = (queueTimeoutMs = 5000) => new Fleet({ queueSize: 2, queueTimeoutMs, heartbeatMs: 60_000, logger: createLogger("test", "silent") });
const request = { model: "famB-v3.1", messages: [{ role: "user" as const, content: "hi" }] };

async function drain(events: AsyncIterable<CompletionEvent>): Promise<CompletionEvent[]> {
  const out: CompletionEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe("Fleet routing", () => {
  it("picks the least-loaded pool and queues when every slot is busy", () => {
    const f = fleet();
    const a = new RecordingLink(), b = new RecordingLink();
    f.attach(register("a", 2), a);
    f.attach(register("b", 2), b);
    for (let i = 0; i < 4; i++) f.submit(request);
    expect(a.requests()).toHaveLength(2);
    expect(b.requests()).toHaveLength(2);
    f.submit(request);
    expect(f.queued).toBe(1);
    f.close();
  });

  it("a request with no text yet moves to another agent when its agent is lost", async () => {
    const f = fleet();
    const a = new RecordingLink(), b = new RecordingLink();
    f.attach(register("a", 1), a);
    const events = drain(f.submit(request));
    const [id] = a.requests();
    f.attach(register("b", 1), b);
    f.detach("a", a, "killed");
    expect(b.requests()).toEqual([id]);
    f.receive("b", b, { body: "chunk", chunk: { request_id: id!, text: "hello" } });
    f.receive("b", b, { body: "done", done: { request_id: id!, finish_reason: "stop", usage: { prompt_tokens: 3, completion_tokens: 1 } } });
    expect(await events).toEqual([{ type: "text", text: "hello" }, { type: "done", finishReason: "stop", promptTokens: 3, completionTokens: 1 }]);
    f.close();
  });

  it("a request that already streamed text ends with a 502 when its agent is lost", async () => {
    const f = fleet();
    const a = new RecordingLink(), b = new RecordingLink();
    f.attach(register("a", 1), a);
    f.attach(register("b", 1), b);
    const events = drain(f.submit(request));
    const owner = a.requests().length ? a : b;
    const id = owner.requests()[0]!;
    f.receive(owner === a ? "a" : "b", owner, { body: "chunk", chunk: { request_id: id, text: "partial" } });
    f.detach(owner === a ? "a" : "b", owner, "killed");
    await expect(events).rejects.toMatchObject({ status: 502, code: "agent_lost" });
    expect((owner === a ? b : a).requests()).toHaveLength(0);
    f.close();
  });

  it("a retryable agent error before any text retries elsewhere; attempts are bounded", async () => {
    const f = new Fleet({ queueSize: 4, queueTimeoutMs: 5000, heartbeatMs: 60_000, maxAttempts: 2, logger: createLogger("test", "silent") });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const events = drain(f.submit(request));
    for (let i = 0; i < 2; i++) {
      const id = a.requests().at(-1)!;
      f.receive("a", a, { body: "error", error: { request_id: id, code: "draining", message: "draining", retryable: true } });
    }
    await expect(events).rejects.toMatchObject({ status: 502, code: "agents_failed" });
    f.close();
  });

  it("queued requests time out with a 503; the queue is bounded", async () => {
    const f = fleet(100);
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
    f.receive("a", a, { body: "error", error: { request_id: id, code: "cancelled", message: "cancelled", retryable: false } });
    expect(a.requests()).toHaveLength(2); // freed and given to the queued one
    f.close();
  });
});

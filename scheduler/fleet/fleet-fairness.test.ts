/**
 * The Fleet's per-account queues: a freed slot goes to the least recently served account, so one
 * account's flood cannot starve another (driven through recording links, as in fleet.test.ts).
 */
import { servingNode } from "../../test/helpers/recording-link.js";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import type { SchedulerMessage } from "../../proto/index.js";
import { Fleet, type FleetOptions } from "./fleet.js";
import type { AgentLink, CompletionEvent } from "./types.js";

class RecordingLink implements AgentLink {
  sent: SchedulerMessage[] = [];
  send(m: SchedulerMessage): void {
    this.sent.push(m);
  }
  close(): void {}
  /** The completions sent, as the prompt text each carried (the tests name requests by it). */
  dispatched(): string[] {
    return this.sent.filter((m) => m.completion).map((m) => m.completion!.messages![0]!.content!);
  }
  idOf(name: string): string {
    return this.sent.find((m) => m.completion?.messages![0]!.content === name)!.completion!.request_id!;
  }
}

const register = (nodeId: string, slots: number, model = "famB-v3.1") => servingNode(nodeId, slots, { models: [model] });

const fleet = (options: Partial<FleetOptions> = {}) => new Fleet({ queueSize: 100, queueTimeoutMs: 5000, heartbeatMs: 60_000, logger: createLogger("test", "silent"), ...options });
const request = (account: string, name: string, model = "famB-v3.1") => ({ model, account, messages: [{ role: "user" as const, content: name }] });

/** Submits and swallows the outcome (these tests look at dispatch order). */
function submit(f: Fleet, account: string, name: string, model?: string): Promise<CompletionEvent[]> {
  const events = f.submit(request(account, name, model));
  const out = (async () => {
    const got: CompletionEvent[] = [];
    for await (const e of events) got.push(e);
    return got;
  })();
  out.catch(() => undefined);
  return out;
}

const done = (f: Fleet, node: string, link: RecordingLink, name: string) =>
  f.receive(node, link, {
    body: "done",
    done: { request_id: link.idOf(name), finish_reason: "stop", usage: { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
  });

/** Finishes whatever runs on the one-slot agent until nothing is left; returns the dispatch order. */
function runAll(f: Fleet, link: RecordingLink): string[] {
  for (let finished = 0; finished < link.dispatched().length; finished++) done(f, "a", link, link.dispatched()[finished]!);
  return link.dispatched();
}

describe("Fleet fairness across accounts", () => {
  it("a freed slot goes to the least recently served account: A's flood does not delay B's request beyond the one running", () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    for (let i = 1; i <= 10; i++) void submit(f, "A", `a${i}`);
    void submit(f, "B", "b1");
    expect(a.dispatched()).toEqual(["a1"]);
    expect(f.queued).toBe(10);
    expect(runAll(f, a)).toEqual(["a1", "b1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10"]);
    expect(f.queued).toBe(0);
    f.close();
  });

  it("several flooding accounts take turns", () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    for (let i = 1; i <= 5; i++) void submit(f, "A", `a${i}`);
    for (let i = 1; i <= 3; i++) void submit(f, "B", `b${i}`);
    void submit(f, "C", "c1");
    expect(runAll(f, a)).toEqual(["a1", "b1", "c1", "a2", "b2", "a3", "b3", "a4", "a5"]);
    f.close();
  });

  it("each account's own requests stay in order; a request for a busy model holds up no other", () => {
    const f = fleet();
    const a = new RecordingLink(),
      other = new RecordingLink();
    f.attach(register("a", 1), a);
    f.attach(register("o", 1, "famC-k2"), other);
    void submit(f, "A", "a1");
    void submit(f, "A", "o1", "famC-k2");
    void submit(f, "A", "a2");
    void submit(f, "A", "o2", "famC-k2");
    void submit(f, "A", "a3");
    expect(a.dispatched()).toEqual(["a1"]);
    expect(other.dispatched()).toEqual(["o1"]);
    f.receive("o", other, { body: "done", done: { request_id: other.idOf("o1"), finish_reason: "stop", usage: null, finish_reasons: [], stop_text: "" } });
    expect(other.dispatched()).toEqual(["o1", "o2"]); // not held up behind a2, which waits for the busy model
    expect(runAll(f, a)).toEqual(["a1", "a2", "a3"]);
    f.close();
  });

  it("a retried request goes back to the head of its account's queue", () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    void submit(f, "A", "a1");
    void submit(f, "A", "a2");
    void submit(f, "B", "b1");
    // a1 fails before any text, retryably: it goes before a2, and B (never served) still goes first.
    f.receive("a", a, { body: "error", error: { request_id: a.idOf("a1"), code: "draining", message: "draining", retryable: true, usage: null } });
    expect(a.dispatched()).toEqual(["a1", "b1"]);
    done(f, "a", a, "b1");
    expect(a.dispatched()).toEqual(["a1", "b1", "a1"]);
    f.close();
  });

  it("the queue bound is global; a full queue makes room for an account holding less of it; cancelled or timed-out requests leave it", async () => {
    const f = fleet({ queueSize: 3, queueTimeoutMs: 100 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    void submit(f, "A", "a1"); // running
    const ac = new AbortController();
    f.submit(request("A", "a2"), ac.signal);
    const a3 = submit(f, "A", "a3");
    void submit(f, "B", "b1"); // the queue is full: a2, a3, b1
    void submit(f, "C", "c1"); // A holds 2 places, C none: A's newest gives way
    await expect(a3).rejects.toMatchObject({ status: 503, code: "queue_full" });
    expect(f.queued).toBe(3);
    // Now no account holds more than one place more than B: B's second request is refused.
    await expect(submit(f, "B", "b2")).rejects.toMatchObject({ status: 503, code: "queue_full" });
    ac.abort();
    expect(f.queued).toBe(2);
    await new Promise((r) => setTimeout(r, 200)); // b1 and c1 time out
    expect(f.queued).toBe(0);
    done(f, "a", a, "a1");
    expect(a.dispatched()).toEqual(["a1"]);
    f.close();
  });

  it("one account's flood cannot keep another out of a full queue", async () => {
    const f = fleet({ queueSize: 10 });
    const a = new RecordingLink();
    f.attach(register("a", 1), a);
    const flood = Array.from({ length: 11 }, (_, i) => submit(f, "A", `a${i + 1}`)); // a1 runs, 10 wait: full
    expect(f.queued).toBe(10);
    void submit(f, "B", "b1");
    await expect(flood[10]).rejects.toMatchObject({ status: 503, code: "queue_full" }); // A's newest gave way
    expect(f.queued).toBe(10);
    expect(runAll(f, a).slice(0, 2)).toEqual(["a1", "b1"]);
    f.close();
  });
});

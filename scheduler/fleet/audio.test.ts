/**
 * The transcription router driven through its agent-side interface, with recording links and a
 * real spool on disk: the window, the order of the bytes, moves to another agent, and what a
 * hostile agent's answers get.
 */
import { afterEach, describe, expect, it } from "vitest";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "../../core/log.js";
import type { SchedulerMessage } from "../../proto/index.js";
import { Spool } from "../audio/spool.js";
import { AudioRouter, type AudioEvent, type AudioNode, type AudioRequest, type TranscriptionInfo } from "./audio.js";
import type { AgentLink } from "./types.js";

class RecordingLink implements AgentLink {
  sent: SchedulerMessage[] = [];
  send(m: SchedulerMessage): boolean {
    this.sent.push(m);
    return true;
  }
  close(): void {}
  /** The request id of the latest transcription sent. */
  requestId(): string {
    return this.sent.filter((m) => m.transcription).at(-1)!.transcription!.request_id!;
  }
  /** The upload bytes sent for `id`, joined. */
  bytes(id: string): Buffer {
    return Buffer.concat(this.sent.filter((m) => m.audio?.request_id === id).map((m) => Buffer.from(m.audio!.data as Uint8Array)));
  }
}

const info: TranscriptionInfo = { models: new Set(["base"]), onDemand: new Set(), defaultModel: "base", slots: 1, capabilities: new Set(), maxFileBytes: 1 << 30 };
const node = (nodeId: string): AudioNode & { link: RecordingLink } => ({ nodeId, link: new RecordingLink(), draining: false, transcription: info, transcriptionJobs: 0 });
const transcript = (text: string) =>
  JSON.stringify({ text, language: "en", duration: 1, task: "transcribe", model: "base", segments: [{ id: 0, start: 0, end: 1, text, words: [] }] });
const tick = () => new Promise((r) => setTimeout(r, 20));

const spools: Spool[] = [];
afterEach(async () => {
  for (const s of spools.splice(0)) await s.remove();
});

async function spoolOf(bytes: Buffer, end = true): Promise<Spool> {
  const spool = await Spool.create(mkdtempSync(join(tmpdir(), "kiln-spool-")));
  spools.push(spool);
  await spool.append(bytes);
  if (end) spool.end();
  return spool;
}

const request = (spool: Spool, streamed = false): AudioRequest => ({ model: "whisper-1", fields: { language: "en" }, needs: [], fileName: "a.wav", spool, streamed });

async function collect(events: AsyncIterable<AudioEvent>): Promise<AudioEvent[]> {
  const out: AudioEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe("AudioRouter", () => {
  it("streams the upload in order, never more than the window ahead of the agent's acknowledgements", async () => {
    const data = Buffer.from(Array.from({ length: 1_200_000 }, (_, i) => i % 251));
    const a = node("a");
    const router = new AudioRouter({ nodes: () => [a], logger: createLogger("test", "silent"), windowBytes: 300_000 });
    const spool = await spoolOf(data);
    const events = collect(router.submit(request(spool), undefined, "t"));
    await tick();
    const id = a.link.requestId();
    expect(a.link.sent[0]!.transcription!.fields).toEqual({ language: "en", model: "base" }); // whisper-1 is the node's default
    // 256 KiB chunks: two fit before 300 000 bytes are out unacknowledged
    expect(a.link.bytes(id).length).toBe(2 * 256 * 1024);
    for (let acked = 0; a.link.bytes(id).length < data.length || !a.link.sent.some((m) => m.audio?.last);) {
      acked = a.link.bytes(id).length;
      router.acked(a, id, acked);
      await tick();
    }
    expect(a.link.bytes(id).equals(data)).toBe(true);
    expect(a.link.sent.find((m) => m.audio?.last)!.audio!.fields).toEqual({ language: "en", model: "base" });
    router.done(a, id, transcript("hello"));
    expect(await events).toEqual([{ type: "done", transcript: expect.objectContaining({ text: "hello" }) }]);
    expect(router.owns(id)).toBe(false); // answered: forgotten
  });

  it("sends a model no node has installed to a node that downloads it, and prefers a node that has it installed", async () => {
    const fetching: AudioNode & { link: RecordingLink } = { ...node("fetching"), transcription: { ...info, onDemand: new Set(["small"]) } };
    const idle = node("idle"); // has neither
    const router = new AudioRouter({ nodes: () => [idle, fetching], logger: createLogger("test", "silent") });
    expect(router.models().sort()).toEqual(["base", "small", "whisper-1"]);
    const small = (spool: Spool): AudioRequest => ({ ...request(spool), model: "small" });
    const events = collect(router.submit(small(await spoolOf(Buffer.from("x"))), undefined, "t"));
    await tick();
    expect(idle.link.sent).toEqual([]);
    router.done(fetching, fetching.link.requestId(), transcript("fetched"));
    expect((await events)[0]).toMatchObject({ type: "done", transcript: { text: "fetched" } });

    // installed somewhere: that node, though the other is less loaded
    const installed: AudioNode & { link: RecordingLink } = { ...node("installed"), transcription: { ...info, models: new Set(["small"]) }, transcriptionJobs: 1 };
    const both = new AudioRouter({ nodes: () => [fetching, installed], logger: createLogger("test", "silent") });
    const sent = fetching.link.sent.length;
    void collect(both.submit(small(await spoolOf(Buffer.from("y"))), undefined, "t2"));
    await tick();
    expect(installed.link.sent.length).toBeGreaterThan(0);
    expect(fetching.link.sent.length).toBe(sent);
  });

  it("a streamed transcription's segments, all messages together, stop at the transcript cap: the client gets an error, the node a cancel and a count", async () => {
    const a = node("a");
    const rejected: string[] = [];
    const router = new AudioRouter({ nodes: () => [a], logger: createLogger("test", "silent"), rejected: (n, kind) => rejected.push(`${n.nodeId}:${kind}`) });
    const events = collect(router.submit(request(await spoolOf(Buffer.from("x")), true), undefined, "t"));
    await tick();
    const id = a.link.requestId();
    // each message within its own cap (1 MiB), 56 of them past the transcript's 48 MiB
    const json = JSON.stringify([{ id: 0, start: 0, end: 1, text: "x".repeat(900_000), words: [] }]);
    for (let i = 0; i < 56; i++) router.segments(a, id, json);
    await expect(events).rejects.toThrow(/the node sent more segments than a transcript holds \(over 50331648 bytes\)/);
    expect(rejected).toEqual(["a:transcript_bytes"]);
    expect(a.link.sent.some((m) => m.cancel?.request_id === id)).toBe(true);
  });

  it("moves a request whose agent went away to another agent, from the first byte", async () => {
    const a = node("a");
    const b = node("b");
    const nodes = [a, b];
    const router = new AudioRouter({ nodes: () => nodes, logger: createLogger("test", "silent") });
    const data = Buffer.from("some audio bytes");
    const events = collect(router.submit(request(await spoolOf(data)), undefined, "t"));
    await tick();
    const first = nodes.find((n) => n.link.sent.length > 0)!;
    const other = first === a ? b : a;
    router.lost(first, "stream ended");
    await tick();
    const id = other.link.requestId();
    expect(other.link.bytes(id).toString()).toBe("some audio bytes");
    router.done(other, id, transcript("moved"));
    expect((await events)[0]).toMatchObject({ type: "done", transcript: { text: "moved" } });
  });

  it("answers a transcript that is not one with a 502, and tells the agent to stop", async () => {
    const a = node("a");
    const router = new AudioRouter({ nodes: () => [a], logger: createLogger("test", "silent") });
    const events = collect(router.submit(request(await spoolOf(Buffer.from("x"))), undefined, "t"));
    await tick();
    const id = a.link.requestId();
    router.done(a, id, JSON.stringify({ text: 42, segments: "no" }));
    await expect(events).rejects.toMatchObject({ status: 502, code: "agent_error" });
    expect(a.link.sent.at(-1)).toEqual({ cancel: { request_id: id } });
  });

  it("ignores answers for requests an agent was not given", async () => {
    const a = node("a");
    const intruder = node("intruder");
    const router = new AudioRouter({ nodes: () => [a], logger: createLogger("test", "silent") });
    const events = collect(router.submit(request(await spoolOf(Buffer.from("x"))), undefined, "t"));
    await tick();
    const id = a.link.requestId();
    router.done(intruder, id, transcript("forged"));
    router.acked(intruder, id, 1e12);
    router.done(a, id, transcript("real"));
    expect((await events)[0]).toMatchObject({ transcript: { text: "real" } });
  });

  it("passes segments on only to a streamed request, and a streamed one that saw them does not move", async () => {
    const a = node("a");
    const b = node("b");
    const router = new AudioRouter({ nodes: () => [a, b], logger: createLogger("test", "silent") });
    const events = collect(router.submit(request(await spoolOf(Buffer.from("x")), true), undefined, "t"));
    await tick();
    const first = a.link.sent.length > 0 ? a : b;
    const id = first.link.requestId();
    router.segments(first, id, JSON.stringify([{ id: 0, start: 0, end: 1, text: " partial", words: [] }]));
    router.lost(first, "gone");
    const got = await events.catch((err: unknown) => err);
    expect(got).toMatchObject({ status: 502, code: "agent_lost" });

    // not streamed: the client saw nothing, so the request moves on and gets no segments
    const quiet = collect(router.submit(request(await spoolOf(Buffer.from("y"))), undefined, "t2"));
    await tick();
    const on = a.link.sent.some((m) => m.transcription?.trace_id === "t2") ? a : b;
    const elsewhere = on === a ? b : a;
    router.segments(on, on.link.requestId(), JSON.stringify([{ id: 0, start: 0, end: 1, text: " partial", words: [] }]));
    router.lost(on, "gone");
    await tick();
    router.done(elsewhere, elsewhere.link.requestId(), transcript("whole"));
    expect(await quiet).toEqual([{ type: "done", transcript: expect.objectContaining({ text: "whole" }) }]);
  });

  it("gives up on an agent that acknowledges nothing and moves the request on", async () => {
    const a = node("a");
    const b = node("b");
    const router = new AudioRouter({ nodes: () => [a, b], logger: createLogger("test", "silent"), windowBytes: 1000, ackStallMs: 150 });
    const events = collect(router.submit(request(await spoolOf(Buffer.alloc(600_000, 7))), undefined, "t"));
    await tick();
    const first = a.link.sent.length > 0 ? a : b;
    const other = first === a ? b : a;
    const started = Date.now();
    while (!first.link.sent.some((m) => m.cancel) && Date.now() - started < 2000) await new Promise((r) => setTimeout(r, 5));
    expect(Date.now() - started).toBeGreaterThanOrEqual(100); // not before the stall time
    expect(first.link.sent.at(-1)).toMatchObject({ cancel: { request_id: first.link.requestId() } });
    await tick();
    const id = other.link.requestId();
    expect(other.link.bytes(id).length).toBe(256 * 1024); // it starts over there
    router.done(other, id, transcript("ok"));
    expect((await events)[0]).toMatchObject({ type: "done" });
  });
});

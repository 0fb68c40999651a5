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
import { fleetProto, type AgentMessage, type AgentMessage__Output, type SchedulerMessage } from "../../proto/index.js";
import type { JobOptions } from "../../speech/options.js";
import type { Transcript } from "../../speech/transcript.js";
import { optionsToWire, segmentToWire, transcriptToWire } from "../../speech/wire.js";
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
const transcriptOf = (text: string): Transcript => ({
  text,
  language: "en",
  duration: 1,
  task: "transcribe",
  model: "base",
  segments: [{ id: 0, start: 0, end: 1, text, words: [] }],
});
/** An agent's message as the scheduler reads it: encoded and decoded as on the link. */
function wire(m: AgentMessage): AgentMessage__Output {
  const connect = fleetProto().kiln.v1.Fleet.service.Connect;
  return connect.requestDeserialize(connect.requestSerialize(m)) as AgentMessage__Output;
}
/** A TranscriptionDone for `id` with `t`: typed, as a current agent sends it. */
const transcript = (id: string, t: string | Transcript) =>
  wire({ transcription_done: { request_id: id, transcript: transcriptToWire(typeof t === "string" ? transcriptOf(t) : t) } }).transcription_done!;
/** The same as an agent from before typed messages sends it: JSON text. */
const transcriptJson = (id: string, t: string | Transcript) =>
  wire({ transcription_done: { request_id: id, transcript_json: JSON.stringify(typeof t === "string" ? transcriptOf(t) : t) } }).transcription_done!;
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

const options: JobOptions = { model: "tiny", translate: false, speakerDiarization: false, language: "en", decoding: { temperature: 0 } };
const request = (spool: Spool, streamed = false): AudioRequest => ({
  model: "whisper-1",
  options,
  fields: { language: "en", temperature: "0" },
  needs: [],
  fileName: "a.wav",
  spool,
  streamed,
});

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
    // typed options, whisper-1 as the node's default; the form's fields beside them for an agent from before them
    expect(a.link.sent[0]!.transcription!.options).toEqual(optionsToWire({ ...options, model: "base" }));
    expect(a.link.sent[0]!.transcription!.fields).toEqual({ language: "en", temperature: "0", model: "base" });
    // 256 KiB chunks: two fit before 300 000 bytes are out unacknowledged
    expect(a.link.bytes(id).length).toBe(2 * 256 * 1024);
    for (let acked = 0; a.link.bytes(id).length < data.length || !a.link.sent.some((m) => m.audio?.last);) {
      acked = a.link.bytes(id).length;
      router.acked(a, id, acked);
      await tick();
    }
    expect(a.link.bytes(id).equals(data)).toBe(true);
    expect(a.link.sent.find((m) => m.audio?.last)!.audio!.options).toEqual(optionsToWire({ ...options, model: "base" }));
    expect(a.link.sent.find((m) => m.audio?.last)!.audio!.fields).toEqual({ language: "en", temperature: "0", model: "base" });
    router.done(a, transcript(id, "hello"));
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
    router.done(fetching, transcript(fetching.link.requestId(), "fetched"));
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

  it.each([
    ["typed", (id: string) => wire({ transcription_segments: { request_id: id, segments: [segmentToWire({ id: 0, start: 0, end: 1, text: "x".repeat(900_000), words: [] })] } })],
    [
      "JSON text (an older agent's)",
      (id: string) => wire({ transcription_segments: { request_id: id, segments_json: JSON.stringify([{ id: 0, start: 0, end: 1, text: "x".repeat(900_000), words: [] }]) } }),
    ],
  ])("a streamed transcription's segments (%s), all messages together, stop at the transcript cap: the client gets an error, the node a cancel and a count", async (_, message) => {
    const a = node("a");
    const rejected: string[] = [];
    const router = new AudioRouter({ nodes: () => [a], logger: createLogger("test", "silent"), rejected: (n, kind) => rejected.push(`${n.nodeId}:${kind}`) });
    const events = collect(router.submit(request(await spoolOf(Buffer.from("x")), true), undefined, "t"));
    await tick();
    const id = a.link.requestId();
    // each message within its own cap (1 MiB), 56 of them past the transcript's 48 MiB
    for (let i = 0; i < 56; i++) router.segments(a, message(id).transcription_segments!);
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
    router.done(other, transcript(id, "moved"));
    expect((await events)[0]).toMatchObject({ type: "done", transcript: { text: "moved" } });
  });

  it("answers a transcript that is not one with a 502, and tells the agent to stop", async () => {
    const a = node("a");
    const router = new AudioRouter({ nodes: () => [a], logger: createLogger("test", "silent") });
    const events = collect(router.submit(request(await spoolOf(Buffer.from("x"))), undefined, "t"));
    await tick();
    const id = a.link.requestId();
    router.done(a, { request_id: id, transcript_json: JSON.stringify({ text: 42, segments: "no" }) });
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
    router.done(intruder, transcript(id, "forged"));
    router.acked(intruder, id, 1e12);
    router.done(a, transcript(id, "real"));
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
    router.segments(
      first,
      wire({ transcription_segments: { request_id: id, segments: [segmentToWire({ id: 0, start: 0, end: 1, text: " partial", words: [] })] } }).transcription_segments!,
    );
    router.lost(first, "gone");
    const got = await events.catch((err: unknown) => err);
    expect(got).toMatchObject({ status: 502, code: "agent_lost" });

    // not streamed: the client saw nothing, so the request moves on and gets no segments
    const quiet = collect(router.submit(request(await spoolOf(Buffer.from("y"))), undefined, "t2"));
    await tick();
    const on = a.link.sent.some((m) => m.transcription?.trace_id === "t2") ? a : b;
    const elsewhere = on === a ? b : a;
    router.segments(
      on,
      wire({ transcription_segments: { request_id: on.link.requestId(), segments: [segmentToWire({ id: 0, start: 0, end: 1, text: " partial", words: [] })] } })
        .transcription_segments!,
    );
    router.lost(on, "gone");
    await tick();
    router.done(elsewhere, transcript(elsewhere.link.requestId(), "whole"));
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
    router.done(other, transcript(id, "ok"));
    expect((await events)[0]).toMatchObject({ type: "done" });
  });

  describe("typed transcripts and an older agent's JSON text (fleet.proto, above TranscriptionRequest)", () => {
    /** Every member a transcript may have: detected language, diarization, translation. */
    const rich: Transcript = {
      text: "Hallo Welt. Wie geht's?",
      language: "en",
      language_probability: 0.912,
      duration: 3.5,
      task: "transcribe",
      model: "base",
      segments: [
        {
          id: 0,
          start: 0,
          end: 1.25,
          text: "Hallo Welt.",
          words: [
            { word: " Hello", start: 0, end: 0.5, confidence: 0.98, speaker: "SPEAKER_00" },
            { word: " world.", start: 0.5, end: 1.25, confidence: 0.75, speaker: "SPEAKER_00" },
          ],
          speaker: "SPEAKER_00",
          original_text: "Hello world.",
        },
        { id: 1, start: 1.5, end: 3.5, text: "Wie geht's?", words: [{ word: " How", start: 1.5, end: 2, confidence: 0.5 }], original_text: "How are you?" },
      ],
      transcript_with_speakers: [{ speaker: "SPEAKER_00", start: 0, end: 1.25, text: "Hallo Welt.", original_text: "Hello world." }],
      translated_to: "de",
      original_text: "Hello world. How are you?",
    };

    async function answered(message: (id: string) => Parameters<AudioRouter["done"]>[1]): Promise<{ events: AudioEvent[]; rejected: unknown[]; sent: SchedulerMessage[] }> {
      const a = node("a");
      const rejected: unknown[] = [];
      const router = new AudioRouter({ nodes: () => [a], logger: createLogger("test", "silent"), rejected: (_, kind, detail) => rejected.push({ kind, ...detail }) });
      const events = collect(router.submit(request(await spoolOf(Buffer.alloc(16_000, 1))), undefined, "t"));
      await tick();
      router.done(a, message(a.link.requestId()));
      return { events: await events.catch((err: unknown) => [{ type: "error", err }] as unknown as AudioEvent[]), rejected, sent: a.link.sent };
    }

    it("reads a typed transcript and the same as JSON text alike: every member, in the JSON's order", async () => {
      const typed = await answered((id) => transcript(id, rich));
      const json = await answered((id) => transcriptJson(id, rich));
      expect(typed.events).toEqual([{ type: "done", transcript: rich }]);
      expect(json.events).toEqual(typed.events);
      // the order too: a client's verbose_json is rendered from it
      expect(JSON.stringify(typed.events)).toBe(JSON.stringify(json.events));
      // diarized with no turns: an empty list, not none
      const alone = await answered((id) => transcript(id, { ...transcriptOf("x"), transcript_with_speakers: [] }));
      expect(alone.events).toEqual([{ type: "done", transcript: { ...transcriptOf("x"), transcript_with_speakers: [] } }]);
    });

    it("takes the typed transcript when a message carries both", async () => {
      const both = await answered((id) => ({ ...transcript(id, "typed"), transcript_json: JSON.stringify(transcriptOf("json")) }));
      expect(both.events).toEqual([{ type: "done", transcript: transcriptOf("typed") }]);
    });

    it.each([
      ["typed", transcript],
      ["JSON text", transcriptJson],
    ])("holds a %s transcript's duration to what its upload can hold, and counts the claim", async (_, form) => {
      const { events, rejected } = await answered((id) => form(id, { ...transcriptOf("long"), duration: 4_000_000_000 }));
      // 16 000 bytes, not a WAV: at most 32 s at 4 kbit/s
      expect(events).toEqual([{ type: "done", transcript: { ...transcriptOf("long"), duration: 32 } }]);
      expect(rejected).toEqual([{ kind: "audio_seconds", request: "t", claimed: 4_000_000_000, bound: 32 }]);
    });

    it.each([
      ["a task that is none", { task: "sing" }],
      ["a duration that is no number", { duration: NaN }],
      ["a word past its length", { segments: [{ id: 0, start: 0, end: 1, text: "x", words: [{ word: "x".repeat(1_000_001), start: 0, end: 1, confidence: 1 }] }] }],
    ])("answers a typed transcript with %s with a 502, and tells the agent to stop", async (_, lie) => {
      const { events, sent } = await answered((id) => transcript(id, { ...transcriptOf("x"), ...(lie as Partial<Transcript>) }));
      expect(events).toEqual([{ type: "error", err: expect.objectContaining({ status: 502, code: "agent_error" }) }]);
      expect(sent.at(-1)).toMatchObject({ cancel: {} });
    });

    it("passes a streamed request's typed segments on as the JSON's, and takes typed ones over JSON text in one message", async () => {
      const a = node("a");
      const router = new AudioRouter({ nodes: () => [a], logger: createLogger("test", "silent") });
      const events = collect(router.submit(request(await spoolOf(Buffer.alloc(16_000, 1)), true), undefined, "t"));
      await tick();
      const id = a.link.requestId();
      const typed = rich.segments.map(segmentToWire);
      router.segments(a, wire({ transcription_segments: { request_id: id, segments: typed } }).transcription_segments!);
      router.segments(a, wire({ transcription_segments: { request_id: id, segments_json: JSON.stringify(rich.segments) } }).transcription_segments!);
      router.segments(a, wire({ transcription_segments: { request_id: id, segments: typed, segments_json: "not json" } }).transcription_segments!);
      router.done(a, transcript(id, rich));
      expect(await events).toEqual([
        { type: "segments", segments: rich.segments },
        { type: "segments", segments: rich.segments },
        { type: "segments", segments: rich.segments },
        { type: "done", transcript: rich },
      ]);
    });
  });
});

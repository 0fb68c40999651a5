/**
 * The fleet link's typed transcription messages: options and transcripts there and back through the
 * real encoding, an older scheduler's form fields still read, and typed options held to the form's checks.
 */
import { describe, expect, it } from "vitest";
import { WhisperCatalog } from "../models/whisper.js";
import { fleetProto, type AgentMessage, type AgentMessage__Output, type SchedulerMessage, type SchedulerMessage__Output } from "../proto/index.js";
import { MAX_PROMPT_CHARS, checkJobOptions, parseJobFields } from "./fields.js";
import type { JobOptions } from "./options.js";
import { segmentSchema, transcriptSchema, type Segment, type Transcript } from "./transcript.js";
import {
  doneAnswer,
  jobOptionsOf,
  optionsFromWire,
  optionsToWire,
  readsTyped,
  segmentFromWire,
  segmentsAnswer,
  segmentToWire,
  transcriptFromWire,
  transcriptToWire,
} from "./wire.js";

const connect = () => fleetProto().kiln.v1.Fleet.service.Connect;
/** A scheduler's message as an agent reads it, and an agent's as a scheduler reads it: encoded and decoded. */
const down = (m: SchedulerMessage) => connect().responseDeserialize(connect().responseSerialize(m)) as SchedulerMessage__Output;
const up = (m: AgentMessage) => connect().requestDeserialize(connect().requestSerialize(m)) as AgentMessage__Output;

const catalog = WhisperCatalog.builtin;

/** Options as the form makes them: every field, and none. */
const every = parseJobFields({
  model: "small",
  language: "German",
  target_language: "fr",
  speaker_diarization: "yes",
  min_speakers: "2",
  max_speakers: "3",
  prompt: "Kiln,",
  hotwords: "whisper.cpp",
  temperature: "0",
  temperature_increment: "0.2",
  entropy_threshold: "2.2",
  logprob_threshold: "-0.8",
  no_speech_threshold: ".5",
  vad_threshold: "0.35",
  min_silence_ms: "7",
});
const none = parseJobFields({});

describe("options on the link", () => {
  it.each([
    ["every field", every],
    ["none", none],
    ["translation off, diarization off, a zero temperature", parseJobFields({ translate: "false", temperature: "0", vad_threshold: "0.05" })],
  ])("come back as they went, through the encoding (%s)", (_, options) => {
    const sent = down({ transcription: { request_id: "r", options: optionsToWire(options) } }).transcription!;
    expect(optionsFromWire(sent.options!)).toEqual(options);
    // and the other way: what a node reads goes back as the same message
    expect(optionsToWire(optionsFromWire(sent.options!))).toEqual(optionsToWire(options));
    // the fleet flag is the node's own, never sent
    expect(optionsToWire({ ...options, fleet: true })).toEqual(optionsToWire(options));
  });

  it("carry exactly the form's values: a 7 ms silence stays 0.007 s, a zero temperature is a temperature", () => {
    const sent = down({ transcription: { request_id: "r", options: optionsToWire(every) } }).transcription!.options!;
    expect(sent).toMatchObject({ vad_min_silence_seconds: 0.007, temperature: 0, language: "de", target_language: "fr", prompt: "Kiln, whisper.cpp" });
    expect(down({ transcription: { request_id: "r", options: optionsToWire(none) } }).transcription!.options).not.toHaveProperty("temperature");
  });

  it("are read typed when a request carries them, else from an older scheduler's form fields, the same options either way", () => {
    const fields = { model: "small", language: "de", min_silence_ms: "7", hotwords: "Kiln" };
    const old = down({ transcription: { request_id: "r", fields } }).transcription!;
    const current = down({ transcription: { request_id: "r", fields, options: optionsToWire(parseJobFields(fields)) } }).transcription!;
    expect(old.options).toBeNull();
    expect(jobOptionsOf(old, catalog)).toEqual(parseJobFields(fields));
    expect(jobOptionsOf(current, catalog)).toEqual(parseJobFields(fields));
    // typed first: the map is only for agents from before it
    const both = down({ transcription: { request_id: "r", fields: { model: "tiny" }, options: optionsToWire({ ...none, model: "base" }) } }).transcription!;
    expect(jobOptionsOf(both, catalog)).toMatchObject({ model: "base" });
    // a last chunk with neither changes nothing
    expect(jobOptionsOf(down({ audio: { request_id: "r", last: true } }).audio!, catalog)).toBeUndefined();
  });

  it.each<[string, Partial<JobOptions>, string, string]>([
    ["a model outside the catalog", { model: "huge" }, "invalid_model", 'model: "huge" is not one of'],
    ["a language whisper does not know", { language: "xx" }, "invalid_language", 'language: "xx" is not a language whisper knows'],
    ["a target language it does not know", { targetLanguage: "klingon" }, "invalid_language", 'target_language: "klingon"'],
    ["a target language without translation", { targetLanguage: "fr", translate: false }, "translate_disabled", "target_language: given while translate is false"],
    ["too many speakers", { maxSpeakers: 21 }, "invalid_speakers", "max_speakers: must be between 1 and 20, got 21"],
    ["no speakers", { minSpeakers: 0 }, "invalid_speakers", "min_speakers: must be between 1 and 20, got 0"],
    ["fewer speakers at most than at least", { minSpeakers: 3, maxSpeakers: 2 }, "invalid_speakers", "min_speakers: 3 is more than max_speakers 2"],
    ["a long prompt", { decoding: { prompt: "x".repeat(MAX_PROMPT_CHARS + 1) } }, "invalid_prompt", `prompt: at most ${MAX_PROMPT_CHARS} characters together`],
    ["a control character", { decoding: { prompt: "a\u0000b" } }, "invalid_prompt", "prompt: control characters are not allowed"],
    ["a hot temperature", { decoding: { temperature: 1.5 } }, "invalid_temperature", 'temperature: expected a number from 0 to 1, got "1.5"'],
    ["no temperature at all", { decoding: { temperature: NaN } }, "invalid_temperature", 'temperature: expected a number from 0 to 1, got "NaN"'],
    ["an infinite threshold", { decoding: { entropyThreshold: Infinity } }, "invalid_entropy_threshold", "entropy_threshold: expected a number from 0 to 4"],
    ["a tiny temperature step", { decoding: { temperatureIncrement: 0.01 } }, "invalid_temperature_increment", "expected 0 (no fallback) or a number from 0.2 to 1"],
    ["a positive log probability", { decoding: { logprobThreshold: 0 } }, "invalid_logprob_threshold", "logprob_threshold: expected a number from -10 to -0.1"],
    ["a no-speech threshold past 1", { decoding: { noSpeechThreshold: 2 } }, "invalid_no_speech_threshold", "no_speech_threshold"],
    ["a speech threshold of 1", { vad: { threshold: 1 } }, "invalid_vad_threshold", 'vad_threshold: expected a number from 0.05 to 0.95, got "1"'],
    ["a minute of silence", { vad: { minSilenceSeconds: 60 } }, "invalid_min_silence_ms", 'min_silence_ms: expected a number from 0 to 10000, got "60000"'],
  ])("are held by a node to the form's checks: %s is refused as the form's field would be", (_, lie, code, message) => {
    const options = { ...none, ...lie };
    const sent = down({ transcription: { request_id: "r", options: optionsToWire(options) } }).transcription!;
    expect(() => jobOptionsOf(sent, catalog)).toThrow(expect.objectContaining({ status: 400, code, message: expect.stringContaining(message) }));
  });

  it("are held to the same bounds as the form: the edges of each range pass typed as they pass as text", () => {
    const edges = parseJobFields({
      min_speakers: "1",
      max_speakers: "20",
      temperature: "1",
      temperature_increment: "1",
      entropy_threshold: "4",
      logprob_threshold: "-10",
      no_speech_threshold: "0",
      vad_threshold: "0.95",
      min_silence_ms: "10000",
    });
    expect(checkJobOptions(edges, catalog)).toEqual(edges);
    expect(checkJobOptions(every, catalog)).toEqual(every);
    expect(checkJobOptions({ ...none, model: "" }, catalog)).toEqual(none); // no model: the catalog's default, as the form's
    // what the link's whole numbers cannot carry, the check still refuses
    expect(() => checkJobOptions({ ...none, minSpeakers: 1.5 }, catalog)).toThrow(
      expect.objectContaining({ code: "invalid_integer", message: 'min_speakers: expected a whole number, got "1.5"' }),
    );
  });
});

/** Every member a transcript may have: detected language, diarization, translation. */
const rich: Transcript = {
  text: "Hallo Welt. Wie geht's?",
  language: "en",
  language_probability: 0.912,
  duration: 3.5,
  task: "translate",
  model: "base",
  segments: [
    {
      id: 0,
      start: 0,
      end: 1.25,
      text: "Hallo Welt.",
      words: [
        { word: " Hello", start: 0, end: 0.5, confidence: 0.98, speaker: "SPEAKER_00" },
        { word: "", start: 0.5, end: 1.25, confidence: 0, speaker: "" },
      ],
      speaker: "SPEAKER_00",
      original_text: "Hello world.",
    },
    { id: 1, start: 1.5, end: 3.5, text: "", words: [], original_text: "" },
  ],
  transcript_with_speakers: [{ speaker: "SPEAKER_00", start: 0, end: 1.25, text: "Hallo Welt.", original_text: "Hello world." }],
  translated_to: "de",
  original_text: "Hello world. How are you?",
};
const plain: Transcript = { text: "", language: "en", duration: 0, task: "transcribe", model: "tiny", segments: [] };

describe("transcripts on the link", () => {
  it.each([
    ["every member, empty strings and zeros among them", rich],
    ["none of the optional ones", plain],
    ["diarized with no turns", { ...plain, transcript_with_speakers: [] }],
  ])("come back as they went, through the encoding, in the JSON's order (%s)", (_, t) => {
    const read = transcriptFromWire(up({ transcription_done: { request_id: "r", transcript: transcriptToWire(t) } }).transcription_done!.transcript!);
    expect(read).toEqual(t);
    expect(JSON.stringify(read)).toBe(JSON.stringify(t));
    const again = transcriptFromWire(up({ transcription_done: { request_id: "r", transcript: transcriptToWire(read) } }).transcription_done!.transcript!);
    expect(again).toEqual(t);
  });

  it("keep a segment's members, one at a time as they are sent", () => {
    for (const s of rich.segments) {
      const [read] = up({ transcription_segments: { request_id: "r", segments: [segmentToWire(s)] } }).transcription_segments!.segments.map(segmentFromWire);
      expect(read).toEqual(s);
      expect(JSON.stringify(read)).toBe(JSON.stringify(s));
    }
  });

  it("leave out what the transcript lacks: no speaker, no translation, no probability", () => {
    const read = up({ transcription_done: { request_id: "r", transcript: transcriptToWire({ ...plain, segments: [rich.segments[1]!] }) } }).transcription_done!.transcript!;
    expect(read.transcript_with_speakers).toBeNull();
    const t = transcriptFromWire(read);
    expect(Object.keys(t)).toEqual(["text", "language", "duration", "task", "model", "segments"]);
    expect(Object.keys(t.segments[0]!)).toEqual(["id", "start", "end", "text", "words", "original_text"]);
  });

  it("are no longer typed than as JSON text: a message cap holds at least the transcript it held", () => {
    const segments: Segment[] = Array.from({ length: 2000 }, (_, i) => ({
      id: i,
      start: i * 2.5,
      end: i * 2.5 + 2.25,
      text: " a few words said",
      words: [" a", " few", " words", " said"].map((word, j) => ({ word, start: i * 2.5 + j * 0.5, end: i * 2.5 + j * 0.5 + 0.37, confidence: 0.8123, speaker: "SPEAKER_01" })),
      speaker: "SPEAKER_01",
    }));
    const t: Transcript = { ...plain, duration: 5000, segments, text: segments.map((s) => s.text).join(" ") };
    const typed = connect().requestSerialize({ transcription_done: { request_id: "r", transcript: transcriptToWire(t) } }).length;
    const json = connect().requestSerialize({ transcription_done: { request_id: "r", transcript_json: JSON.stringify(t) } }).length;
    expect(typed).toBeLessThan(json);
  });
});

describe("an agent's answer, in the form its scheduler reads", () => {
  const older = down({ transcription: { request_id: "r", fields: { model: "tiny" } } }).transcription!;
  const current = down({ transcription: { request_id: "r", fields: { model: "tiny" }, options: optionsToWire(none) } }).transcription!;

  it("is JSON text alone to a scheduler that sent no typed options, as an older scheduler reads it", () => {
    expect(readsTyped(older)).toBe(false);
    const done = up({ transcription_done: doneAnswer("r", rich, readsTyped(older)) }).transcription_done!;
    expect(done.transcript).toBeNull();
    // what a scheduler from before typed messages does with it: JSON.parse and the schema
    expect(transcriptSchema.parse(JSON.parse(done.transcript_json))).toEqual(rich);
    const segments = up({ transcription_segments: segmentsAnswer("r", rich.segments, false) }).transcription_segments!;
    expect(segments.segments).toEqual([]);
    expect(segmentSchema.array().parse(JSON.parse(segments.segments_json))).toEqual(rich.segments);
  });

  it("is typed alone to a scheduler that sent typed options: no JSON text beside it to double the message", () => {
    expect(readsTyped(current)).toBe(true);
    const done = up({ transcription_done: doneAnswer("r", rich, readsTyped(current)) }).transcription_done!;
    expect(done.transcript_json).toBe("");
    expect(transcriptFromWire(done.transcript!)).toEqual(rich);
    const segments = up({ transcription_segments: segmentsAnswer("r", rich.segments, true) }).transcription_segments!;
    expect(segments.segments_json).toBe("");
    expect(segments.segments.map(segmentFromWire)).toEqual(rich.segments);
  });
});

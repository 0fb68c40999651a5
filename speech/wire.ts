/**
 * The fleet link's typed transcription messages (proto/kiln/v1/fleet.proto) to and from speech's own
 * types: a job's options (`TranscriptionOptions` ↔ `JobOptions`) and its transcript (`Transcript`,
 * `TranscriptSegment` ↔ `./transcript.ts`). Pure: no checks here beyond the shape. What arrives is
 * checked by its receiver, as JSON text was: a node bounds options with `checkJobOptions`
 * (`./fields.ts`), a scheduler a transcript with `transcriptSchema`.
 *
 * For a rolling upgrade the messages keep their JSON text and form map beside the typed fields (the
 * rule is in the proto, above TranscriptionRequest): `jobOptionsOf` reads a request's options either
 * way, and `segmentsAnswer` / `doneAnswer` write an agent's answer in the form its scheduler reads.
 */
import type { WhisperCatalog } from "../models/whisper.js";
import type { TranscriptionOptions, TranscriptionOptions__Output } from "../proto/gen/kiln/v1/TranscriptionOptions.js";
import type { Transcript as WireTranscript, Transcript__Output as WireTranscriptOutput } from "../proto/gen/kiln/v1/Transcript.js";
import type { TranscriptSegment, TranscriptSegment__Output } from "../proto/gen/kiln/v1/TranscriptSegment.js";
import type { TranscriptionDone } from "../proto/gen/kiln/v1/TranscriptionDone.js";
import type { TranscriptionSegments } from "../proto/gen/kiln/v1/TranscriptionSegments.js";
import { checkJobOptions, parseJobFields } from "./fields.js";
import type { JobOptions } from "./options.js";
import type { Segment, SpeakerTurn, Transcript } from "./transcript.js";

/** The keys of `value` whose value is not undefined (a proto3 `optional` left out). */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** A job's options as the link carries them (`fleet` stays behind: the node sets it for every job from the link). */
export function optionsToWire(options: JobOptions): TranscriptionOptions {
  const { decoding: d, vad } = options;
  return defined({
    model: options.model,
    language: options.language,
    translate: options.translate,
    target_language: options.targetLanguage,
    speaker_diarization: options.speakerDiarization,
    min_speakers: options.minSpeakers,
    max_speakers: options.maxSpeakers,
    prompt: d?.prompt,
    temperature: d?.temperature,
    temperature_increment: d?.temperatureIncrement,
    entropy_threshold: d?.entropyThreshold,
    logprob_threshold: d?.logprobThreshold,
    no_speech_threshold: d?.noSpeechThreshold,
    vad_threshold: vad?.threshold,
    vad_min_silence_seconds: vad?.minSilenceSeconds,
  });
}

/** The options a link message carries, unchecked (`checkJobOptions` bounds them). */
export function optionsFromWire(m: TranscriptionOptions__Output): JobOptions {
  const decoding = defined({
    prompt: m.prompt,
    temperature: m.temperature,
    temperatureIncrement: m.temperature_increment,
    entropyThreshold: m.entropy_threshold,
    logprobThreshold: m.logprob_threshold,
    noSpeechThreshold: m.no_speech_threshold,
  });
  const vad = defined({ threshold: m.vad_threshold, minSilenceSeconds: m.vad_min_silence_seconds });
  return defined({
    model: m.model,
    language: m.language,
    translate: m.translate,
    targetLanguage: m.target_language,
    speakerDiarization: m.speaker_diarization,
    minSpeakers: m.min_speakers,
    maxSpeakers: m.max_speakers,
    decoding: Object.keys(decoding).length > 0 ? decoding : undefined,
    vad: Object.keys(vad).length > 0 ? vad : undefined,
  });
}

/**
 * The options of a TranscriptionRequest or of an upload's last AudioChunk, checked: the typed
 * `options` when present, else an older scheduler's form `fields`, parsed; undefined when it
 * carries neither (a last chunk that changes nothing).
 */
export function jobOptionsOf(message: { options?: TranscriptionOptions__Output | null; fields?: Record<string, string> }, catalog: WhisperCatalog): JobOptions | undefined {
  if (message.options) return checkJobOptions(optionsFromWire(message.options), catalog);
  if (message.fields && Object.keys(message.fields).length > 0) return parseJobFields({ ...message.fields }, catalog);
  return undefined;
}

/** A segment's members, copied in the JSON's order: the typed message and the JSON share their names. */
function segmentOf(s: Segment | TranscriptSegment__Output): Segment {
  return defined({
    id: s.id,
    start: s.start,
    end: s.end,
    text: s.text,
    words: s.words.map((w) => defined({ word: w.word, start: w.start, end: w.end, confidence: w.confidence, speaker: w.speaker })),
    speaker: s.speaker,
    original_text: s.original_text,
  });
}

export const segmentToWire: (s: Segment) => TranscriptSegment = segmentOf;
/** A segment as it came, unchecked (`segmentSchema` checks it). */
export const segmentFromWire: (s: TranscriptSegment__Output) => Segment = segmentOf;

function turnOf(t: SpeakerTurn): SpeakerTurn {
  return defined({ speaker: t.speaker, start: t.start, end: t.end, text: t.text, original_text: t.original_text });
}

export function transcriptToWire(t: Transcript): WireTranscript {
  return defined({
    text: t.text,
    language: t.language,
    language_probability: t.language_probability,
    duration: t.duration,
    task: t.task,
    model: t.model,
    segments: t.segments.map(segmentToWire),
    transcript_with_speakers: t.transcript_with_speakers ? { turns: t.transcript_with_speakers.map(turnOf) } : undefined,
    translated_to: t.translated_to,
    original_text: t.original_text,
  });
}

/** A transcript as it came, unchecked (`transcriptSchema` checks it: `task`, for one, is any string here). */
export function transcriptFromWire(t: WireTranscriptOutput): Transcript {
  return defined({
    text: t.text,
    language: t.language,
    language_probability: t.language_probability,
    duration: t.duration,
    task: t.task as Transcript["task"],
    model: t.model,
    segments: t.segments.map(segmentFromWire),
    transcript_with_speakers: t.transcript_with_speakers ? t.transcript_with_speakers.turns.map(turnOf) : undefined,
    translated_to: t.translated_to,
    original_text: t.original_text,
  });
}

/** Whether the scheduler that sent a TranscriptionRequest reads typed answers: it does when it sent typed options. */
export function readsTyped(request: { options?: TranscriptionOptions__Output | null }): boolean {
  return !!request.options;
}

/**
 * An agent's segments for a request: typed to a scheduler that sent typed options (`typed`: `readsTyped`), as JSON
 * text to an older one. Never both: see the proto, above TranscriptionRequest.
 */
export function segmentsAnswer(requestId: string, segments: Segment[], typed: boolean): TranscriptionSegments {
  return typed ? { request_id: requestId, segments: segments.map(segmentToWire) } : { request_id: requestId, segments_json: JSON.stringify(segments) };
}

/** An agent's transcript for a request, as `segmentsAnswer`'s segments. */
export function doneAnswer(requestId: string, transcript: Transcript, typed: boolean): TranscriptionDone {
  return typed ? { request_id: requestId, transcript: transcriptToWire(transcript) } : { request_id: requestId, transcript_json: JSON.stringify(transcript) };
}

/**
 * The form of `POST /v1/audio/transcriptions` and `/translations` (OpenAI's fields and Kiln's
 * extras), checked and turned into the job's options (`speech/fields.ts`, whose checks the agent runs
 * again on what it is sent) and, for agents from before typed options, the agent's upload fields.
 * OpenAI fields Kiln cannot honour are refused with a 400 naming them; unknown ones are ignored and
 * named in `x-kiln-ignored-fields`.
 */
import { InvalidRequestError } from "../../core/errors.js";
import { DEFAULT_WHISPER_MODEL } from "../../models/whisper.js";
import { parseJobFields } from "../../speech/fields.js";
import type { JobOptions } from "../../speech/options.js";
import { DEFAULT_AUDIO_MODEL } from "../fleet/audio.js";

export const AUDIO_RESPONSE_FORMATS = ["json", "text", "srt", "verbose_json", "vtt"] as const;
export type AudioResponseFormat = (typeof AUDIO_RESPONSE_FORMATS)[number];

export type AudioTask = "transcriptions" | "translations";

/** Kiln's extras, passed to the agent as they are (their checks are `speech/fields.ts`'s). */
const PASSED = [
  "hotwords",
  "temperature_increment",
  "entropy_threshold",
  "logprob_threshold",
  "no_speech_threshold",
  "vad_threshold",
  "min_silence_ms",
  "min_speakers",
  "max_speakers",
  "target_language",
] as const;
/** OpenAI's fields each endpoint reads itself. */
const OWN: Record<AudioTask, readonly string[]> = {
  transcriptions: [
    "model",
    "language",
    "prompt",
    "response_format",
    "temperature",
    "timestamp_granularities[]",
    "timestamp_granularities",
    "stream",
    "diarize",
    "chunking_strategy",
  ],
  translations: ["model", "prompt", "response_format", "temperature", "timestamp_granularities[]", "timestamp_granularities", "diarize"],
};
/** OpenAI fields of newer models that Kiln's whisper cannot honour. */
const REFUSED: Record<string, string> = {
  "include[]": "token log probabilities are not available from whisper.cpp here",
  include: "token log probabilities are not available from whisper.cpp here",
  "known_speaker_names[]": "speakers are labelled by diarization (diarize), not matched to known voices",
  "known_speaker_references[]": "speakers are labelled by diarization (diarize), not matched to known voices",
};

/** The form as one request: what the scheduler needs, and the agent's fields. */
export interface AudioForm {
  /** `whisper-1` or a whisper model name. */
  model: string;
  responseFormat: AudioResponseFormat;
  /** `timestamp_granularities[]` includes "word". */
  words: boolean;
  stream: boolean;
  /** The agent's upload fields (without `model`): what an agent from before `options` reads. */
  fields: Record<string, string>;
  /** The job's options, checked (`model` is the catalog's default: each node's is set when it is sent there). */
  options: JobOptions;
  /** Capabilities the agent needs: "diarization", "translation". */
  needs: string[];
  /** Fields given that nothing reads. */
  ignored: string[];
}

/** A form field as busboy gives it: one value per name, or every value of a repeated name. */
export type RawFields = Record<string, string[]>;

/**
 * Checks `raw` (the fields so far: those before the file when `partial`) and maps them. A partial
 * form may lack `model`; a complete one may not.
 */
export function parseAudioForm(task: AudioTask, raw: RawFields, partial = false): AudioForm {
  const one = (name: string): string | undefined => {
    const values = raw[name];
    if (!values?.length) return undefined;
    if (values.length > 1) throw new InvalidRequestError("duplicate_field", `${name}: given ${values.length} times`);
    return values[0];
  };
  for (const name of Object.keys(raw)) {
    if (Object.hasOwn(REFUSED, name)) throw new InvalidRequestError("unsupported_parameter", `${name}: ${REFUSED[name]}`, name);
  }
  const model = one("model")?.trim();
  if (!model && !partial) throw new InvalidRequestError("missing_required_field", "model: required (whisper-1, or a whisper model of GET /v1/models)");

  const format = (one("response_format") ?? "json").trim();
  if (!(AUDIO_RESPONSE_FORMATS as readonly string[]).includes(format)) {
    throw new InvalidRequestError("invalid_response_format", `response_format: "${format.slice(0, 40)}" is not one of ${AUDIO_RESPONSE_FORMATS.join(", ")}`);
  }
  const responseFormat = format as AudioResponseFormat;
  const granularities = [...(raw["timestamp_granularities[]"] ?? []), ...(raw.timestamp_granularities ?? [])]
    .flatMap((g) => g.split(","))
    .map((g) => g.trim())
    .filter(Boolean);
  for (const g of granularities) {
    if (g !== "word" && g !== "segment")
      throw new InvalidRequestError("invalid_timestamp_granularities", `timestamp_granularities[]: "${g.slice(0, 40)}" is not one of word, segment`, "timestamp_granularities[]");
  }
  if (granularities.length > 0 && responseFormat !== "verbose_json") {
    throw new InvalidRequestError("invalid_timestamp_granularities", "timestamp_granularities[]: needs response_format verbose_json", "timestamp_granularities[]");
  }
  const stream = flag(one("stream"), "stream");
  if (stream && task === "translations")
    throw new InvalidRequestError("unsupported_parameter", "stream: translations are not streamed; send stream only to /v1/audio/transcriptions");
  if (stream && responseFormat !== "json" && responseFormat !== "text") {
    throw new InvalidRequestError("unsupported_parameter", `stream: streams transcript.text events, which response_format json or text describe, not ${responseFormat}`);
  }
  const chunking = one("chunking_strategy");
  if (chunking !== undefined && chunking.trim() !== "auto") {
    throw new InvalidRequestError("unsupported_parameter", 'chunking_strategy: only "auto" (Kiln cuts the audio at pauses its voice-activity model finds)');
  }

  const fields: Record<string, string> = {};
  const set = (name: string, value: string | undefined) => {
    if (value !== undefined) fields[name] = value;
  };
  if (task === "transcriptions") set("language", one("language"));
  set("prompt", one("prompt"));
  set("temperature", one("temperature"));
  for (const name of PASSED) set(name, one(name));
  const diarize = flag(one("diarize"), "diarize");
  if (diarize) fields.speaker_diarization = "true";
  if (task === "translations" || fields.target_language !== undefined) fields.translate = "true";
  // The agent's own checks, run here first so a bad field is refused before any upload moves.
  const options = parseJobFields({ ...fields, model: model && model !== DEFAULT_AUDIO_MODEL ? model : DEFAULT_WHISPER_MODEL });
  const known = new Set([...OWN[task], ...PASSED, ...Object.keys(REFUSED), "file"]);
  return {
    model: model ?? "",
    responseFormat,
    words: granularities.includes("word"),
    stream,
    fields,
    options,
    needs: needsOf(options),
    ignored: Object.keys(raw).filter((name) => !known.has(name)),
  };
}

/** What an agent must be able to do for these options besides transcribing. */
function needsOf(options: JobOptions): string[] {
  return [...(options.speakerDiarization ? ["diarization"] : []), ...(options.translate && options.targetLanguage && options.targetLanguage !== "en" ? ["translation"] : [])];
}

function flag(raw: string | undefined, name: string): boolean {
  if (raw === undefined || raw.trim() === "") return false;
  const v = raw.trim().toLowerCase();
  if (v === "true" || v === "1") return true;
  if (v === "false" || v === "0") return false;
  throw new InvalidRequestError("invalid_boolean", `${name}: expected true or false, got "${raw.slice(0, 40)}"`);
}

/**
 * Validation of the `POST /api/process` form fields (docs/api.md, "Transcription"): each bad value is a 400 naming
 * its field. Unknown fields are ignored; booleans are `true`/`false` (also 1/0, yes/no).
 */
import { InvalidRequestError } from "../core/errors.js";
import { DEFAULT_WHISPER_MODEL, normalizeLanguage, WhisperCatalog } from "../models/whisper.js";
import type { JobOptions } from "./options.js";
import type { ErrorCode } from "../core/error-codes.js";

/** Most speakers a diarization request may ask for. */
export const MAX_SPEAKERS = 20;

function bool(fields: Record<string, string>, name: string): boolean | undefined {
  const raw = fields[name];
  if (raw === undefined || raw.trim() === "") return undefined;
  const v = raw.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(v)) return true;
  if (["false", "0", "no", "off"].includes(v)) return false;
  throw new InvalidRequestError("invalid_boolean", `${name}: expected true or false, got "${raw}"`);
}

function language(fields: Record<string, string>, name: string, allowAuto: boolean): string | undefined {
  const raw = fields[name];
  if (raw === undefined || raw.trim() === "" || (allowAuto && raw.trim().toLowerCase() === "auto")) return undefined;
  const code = normalizeLanguage(raw);
  if (!code) throw new InvalidRequestError("invalid_language", `${name}: "${raw}" is not a language whisper knows (use a code such as en, de, fr)`);
  return code;
}

function speakers(fields: Record<string, string>, name: string): number | undefined {
  const raw = fields[name];
  if (raw === undefined || raw.trim() === "") return undefined;
  if (!/^\d+$/.test(raw.trim())) throw new InvalidRequestError("invalid_integer", `${name}: expected a whole number, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < 1 || n > MAX_SPEAKERS) throw new InvalidRequestError("invalid_speakers", `${name}: must be between 1 and ${MAX_SPEAKERS}, got ${n}`);
  return n;
}

/** Smallest step of the temperature fallback besides 0 (off): at most six temperatures from 0 to 1. */
export const MIN_TEMPERATURE_STEP = 0.2;

/** Longest `prompt` (with `hotwords`), in characters: whisper keeps at most 224 tokens of it. */
export const MAX_PROMPT_CHARS = 1000;

/** A field whose own code is `invalid_<field>` in the registry. */
type FieldWithCode = ErrorCode extends infer C ? (C extends `invalid_${infer F}` ? F : never) : never;

function decimal(fields: Record<string, string>, name: FieldWithCode, min: number, max: number): number | undefined {
  const raw = fields[name];
  if (raw === undefined || raw.trim() === "") return undefined;
  const n = Number(raw.trim());
  if (!/^-?(\d+\.?\d*|\.\d+)$/.test(raw.trim()) || !(n >= min && n <= max)) {
    throw new InvalidRequestError(`invalid_${name}` as const, `${name}: expected a number from ${min} to ${max}, got "${raw.slice(0, 40)}"`);
  }
  return n;
}

/**
 * Whisper's initial prompt: `prompt` (OpenAI's field), then `hotwords` (faster-whisper's: words and
 * names to expect), at most MAX_PROMPT_CHARS together. Hotwords go last because whisper keeps the
 * end of a prompt longer than its 224 tokens.
 */
function prompt(fields: Record<string, string>): string | undefined {
  const hotwords = fields.hotwords?.trim();
  const text = [fields.prompt?.trim(), hotwords].filter(Boolean).join(" ");
  if (!text) return undefined;
  if (text.length > MAX_PROMPT_CHARS)
    throw new InvalidRequestError(
      "invalid_prompt",
      `prompt${hotwords ? ", hotwords" : ""}: at most ${MAX_PROMPT_CHARS} characters together, got ${text.length} (whisper keeps the last 224 tokens)`,
    );
  if (/[\u0000-\u0008\u000b-\u001f]/.test(text)) throw new InvalidRequestError("invalid_prompt", "prompt: control characters are not allowed");
  return text;
}

/** How whisper decodes and where it hears speech, from the fields that choose it; undefined when none does. */
function decodingOf(fields: Record<string, string>): Pick<JobOptions, "decoding" | "vad"> {
  const decoding: NonNullable<JobOptions["decoding"]> = {};
  const text = prompt(fields);
  if (text) decoding.prompt = text;
  const set = <K extends keyof typeof decoding>(key: K, value: (typeof decoding)[K] | undefined) => {
    if (value !== undefined) decoding[key] = value;
  };
  set("temperature", decimal(fields, "temperature", 0, 1));
  // whisper.cpp lists its fallback temperatures as t, t + step, … up to 1 in single precision: a tiny
  // step never gets there (the list grows until memory runs out), and a small one multiplies the
  // decodes (five per temperature above 0). 0 or 0.2 and up: at most six temperatures.
  const step = decimal(fields, "temperature_increment", 0, 1);
  if (step !== undefined && step !== 0 && step < MIN_TEMPERATURE_STEP) {
    throw new InvalidRequestError(
      "invalid_temperature_increment",
      `temperature_increment: expected 0 (no fallback) or a number from ${MIN_TEMPERATURE_STEP} to 1, got "${fields.temperature_increment}"`,
    );
  }
  set("temperatureIncrement", step);
  set("entropyThreshold", decimal(fields, "entropy_threshold", 0, 4));
  set("logprobThreshold", decimal(fields, "logprob_threshold", -10, -0.1));
  set("noSpeechThreshold", decimal(fields, "no_speech_threshold", 0, 1));
  const threshold = decimal(fields, "vad_threshold", 0.05, 0.95);
  const minSilenceMs = decimal(fields, "min_silence_ms", 0, 10_000);
  const vad = { ...(threshold !== undefined ? { threshold } : {}), ...(minSilenceMs !== undefined ? { minSilenceSeconds: minSilenceMs / 1000 } : {}) };
  return { ...(Object.keys(decoding).length > 0 ? { decoding } : {}), ...(Object.keys(vad).length > 0 ? { vad } : {}) };
}

/** The job options the fields describe, the model one of `catalog`'s (whether it is installed is checked by the caller). */
export function parseJobFields(fields: Record<string, string>, catalog: WhisperCatalog = WhisperCatalog.builtin): JobOptions {
  const model = fields.model?.trim() || DEFAULT_WHISPER_MODEL;
  if (!catalog.has(model)) {
    throw new InvalidRequestError("invalid_model", `model: "${fields.model}" is not one of ${catalog.names.join(", ")}`);
  }
  const lang = language(fields, "language", true);
  const source = language(fields, "source_language", true);
  if (lang && source && lang !== source) {
    throw new InvalidRequestError("conflicting_language", `source_language: "${source}" contradicts language "${lang}"`);
  }
  const target = language(fields, "target_language", false);
  const translateFlag = bool(fields, "translate");
  if (translateFlag === false && target) {
    throw new InvalidRequestError("translate_disabled", "target_language: given while translate is false");
  }
  const translate = translateFlag ?? target !== undefined;
  const speakerDiarization = bool(fields, "speaker_diarization") ?? false;
  const minSpeakers = speakers(fields, "min_speakers");
  const maxSpeakers = speakers(fields, "max_speakers");
  if (minSpeakers !== undefined && maxSpeakers !== undefined && minSpeakers > maxSpeakers) {
    throw new InvalidRequestError("invalid_speakers", `min_speakers: ${minSpeakers} is more than max_speakers ${maxSpeakers}`);
  }
  const sourceLanguage = lang ?? source;
  return {
    model,
    translate,
    speakerDiarization,
    ...(sourceLanguage ? { language: sourceLanguage } : {}),
    ...(target ? { targetLanguage: target } : {}),
    ...(minSpeakers !== undefined ? { minSpeakers } : {}),
    ...(maxSpeakers !== undefined ? { maxSpeakers } : {}),
    ...decodingOf(fields),
  };
}

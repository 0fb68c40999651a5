/**
 * Validation of the `POST /api/process` form fields (docs/api.md, "Transcription"): each bad value is a 400 naming
 * its field. Unknown fields are ignored; booleans are `true`/`false` (also 1/0, yes/no). The same checks
 * hold options that arrive typed (the fleet link's, `checkJobOptions`): one set of bounds for both.
 */
import { InvalidRequestError } from "../core/errors.js";
import { DEFAULT_WHISPER_MODEL, normalizeLanguage, WhisperCatalog } from "../models/whisper.js";
import type { JobOptions } from "./options.js";
import type { ErrorCode } from "../core/error-codes.js";

/** Most speakers a diarization request may ask for. */
export const MAX_SPEAKERS = 20;

/** Smallest step of the temperature fallback besides 0 (off): at most six temperatures from 0 to 1. */
export const MIN_TEMPERATURE_STEP = 0.2;

/** Longest `prompt` (with `hotwords`), in characters: whisper keeps at most 224 tokens of it. */
export const MAX_PROMPT_CHARS = 1000;

/** A field whose own code is `invalid_<field>` in the registry. */
type FieldWithCode = ErrorCode extends infer C ? (C extends `invalid_${infer F}` ? F : never) : never;

/**
 * The decimal fields and their ranges, in the form's units; `scale` is the form's units per the
 * option's (min_silence_ms is milliseconds in the form, seconds in JobOptions).
 */
const DECIMALS = {
  temperature: { min: 0, max: 1, scale: 1 },
  temperature_increment: { min: 0, max: 1, scale: 1 },
  entropy_threshold: { min: 0, max: 4, scale: 1 },
  logprob_threshold: { min: -10, max: -0.1, scale: 1 },
  no_speech_threshold: { min: 0, max: 1, scale: 1 },
  vad_threshold: { min: 0.05, max: 0.95, scale: 1 },
  min_silence_ms: { min: 0, max: 10_000, scale: 1000 },
} as const satisfies Record<string, { min: number; max: number; scale: number }>;
type DecimalField = keyof typeof DECIMALS & FieldWithCode;

/**
 * The options as one side has them, each value read, typed, when its check comes: the upload form's
 * text (`formSource`: a value of the wrong kind is refused here, naming its field) or options already
 * typed (`typedSource`: the fleet link's). Reading in the checks' order keeps the first bad field the
 * one refused, whichever side reads. Names are the form's; values are in the option's units.
 */
interface OptionSource {
  /** What a refusal quotes of a field's value: the form's text as sent. */
  quote(field: string): string;
  model(): string | undefined;
  /** `language`, or the form's `source_language`: the language spoken. */
  language(field: "language" | "target_language"): string | undefined;
  bool(field: "translate" | "speaker_diarization"): boolean | undefined;
  integer(field: "min_speakers" | "max_speakers"): number | undefined;
  /** Whisper's initial prompt, and the fields it came from. */
  prompt(): { text: string; fields: string } | undefined;
  decimal(field: DecimalField): number | undefined;
}

/** The upload form's text: each value parsed when read. */
function formSource(fields: Record<string, string>): OptionSource {
  const given = (name: string): string | undefined => {
    const raw = fields[name];
    return raw === undefined || raw.trim() === "" ? undefined : raw;
  };
  const language = (name: string, allowAuto: boolean): string | undefined => {
    const raw = given(name);
    if (raw === undefined || (allowAuto && raw.trim().toLowerCase() === "auto")) return undefined;
    const code = normalizeLanguage(raw);
    if (!code) throw new InvalidRequestError("invalid_language", `${name}: "${raw}" is not a language whisper knows (use a code such as en, de, fr)`);
    return code;
  };
  return {
    quote: (field) => `${fields[field]}`,
    model: () => fields.model?.trim() || undefined,
    language(field) {
      if (field === "target_language") return language(field, false);
      const lang = language("language", true);
      const source = language("source_language", true);
      if (lang && source && lang !== source) {
        throw new InvalidRequestError("conflicting_language", `source_language: "${source}" contradicts language "${lang}"`);
      }
      return lang ?? source;
    },
    bool(name) {
      const raw = given(name);
      if (raw === undefined) return undefined;
      const v = raw.trim().toLowerCase();
      if (["true", "1", "yes", "on"].includes(v)) return true;
      if (["false", "0", "no", "off"].includes(v)) return false;
      throw new InvalidRequestError("invalid_boolean", `${name}: expected true or false, got "${raw}"`);
    },
    integer(name) {
      const raw = given(name);
      if (raw === undefined) return undefined;
      if (!/^\d+$/.test(raw.trim())) throw new InvalidRequestError("invalid_integer", `${name}: expected a whole number, got "${raw}"`);
      return Number(raw.trim());
    },
    // `prompt` (OpenAI's field), then `hotwords` (faster-whisper's: words and names to expect): whisper
    // keeps the end of a prompt longer than its 224 tokens
    prompt() {
      const hotwords = fields.hotwords?.trim();
      const text = [fields.prompt?.trim(), hotwords].filter(Boolean).join(" ");
      return text ? { text, fields: hotwords ? "prompt, hotwords" : "prompt" } : undefined;
    },
    decimal(name) {
      const raw = given(name);
      if (raw === undefined) return undefined;
      const { min, max, scale } = DECIMALS[name];
      if (!/^-?(\d+\.?\d*|\.\d+)$/.test(raw.trim())) {
        throw new InvalidRequestError(`invalid_${name}` as const, `${name}: expected a number from ${min} to ${max}, got "${raw.slice(0, 40)}"`);
      }
      return Number(raw.trim()) / scale;
    },
  };
}

/** Options already typed (the fleet link's TranscriptionOptions, speech/wire.ts). */
function typedSource(options: JobOptions): OptionSource {
  const { decoding, vad } = options;
  const decimals: Record<DecimalField, number | undefined> = {
    temperature: decoding?.temperature,
    temperature_increment: decoding?.temperatureIncrement,
    entropy_threshold: decoding?.entropyThreshold,
    logprob_threshold: decoding?.logprobThreshold,
    no_speech_threshold: decoding?.noSpeechThreshold,
    vad_threshold: vad?.threshold,
    min_silence_ms: vad?.minSilenceSeconds,
  };
  const quoted: Record<string, unknown> = {
    model: options.model,
    language: options.language,
    target_language: options.targetLanguage,
    min_speakers: options.minSpeakers,
    max_speakers: options.maxSpeakers,
  };
  return {
    quote: (field) => (Object.hasOwn(DECIMALS, field) ? `${(decimals[field as DecimalField] ?? NaN) * DECIMALS[field as DecimalField].scale}` : `${quoted[field] as string}`),
    model: () => options.model || undefined,
    // blank is absent, as in the form
    language: (field) => (field === "language" ? options.language : options.targetLanguage) || undefined,
    bool: (field) => (field === "translate" ? options.translate : options.speakerDiarization),
    integer: (field) => (field === "min_speakers" ? options.minSpeakers : options.maxSpeakers),
    prompt: () => (decoding?.prompt ? { text: decoding.prompt, fields: "prompt" } : undefined),
    decimal: (field) => decimals[field],
  };
}

/**
 * Every check of a transcription's options, in one order, whichever side reads them: the model one
 * of `catalog`'s, languages whisper knows, each number within its range, the prompt's length and
 * characters, and the fields that must agree. Each refusal is a 400 naming its field.
 */
function checkOptions(src: OptionSource, catalog: WhisperCatalog): JobOptions {
  const model = src.model() ?? DEFAULT_WHISPER_MODEL;
  if (!catalog.has(model)) {
    throw new InvalidRequestError("invalid_model", `model: "${src.quote("model")}" is not one of ${catalog.names.join(", ")}`);
  }
  const known = (field: "language" | "target_language"): string | undefined => {
    const value = src.language(field);
    if (value === undefined) return undefined;
    const code = normalizeLanguage(value);
    if (!code) throw new InvalidRequestError("invalid_language", `${field}: "${src.quote(field)}" is not a language whisper knows (use a code such as en, de, fr)`);
    return code;
  };
  const language = known("language");
  const target = known("target_language");
  const translateFlag = src.bool("translate");
  if (translateFlag === false && target) {
    throw new InvalidRequestError("translate_disabled", "target_language: given while translate is false");
  }
  const translate = translateFlag ?? target !== undefined;
  const speakerDiarization = src.bool("speaker_diarization") ?? false;
  const speakers = (field: "min_speakers" | "max_speakers"): number | undefined => {
    const n = src.integer(field);
    if (n === undefined) return undefined;
    if (!Number.isInteger(n)) throw new InvalidRequestError("invalid_integer", `${field}: expected a whole number, got "${src.quote(field)}"`);
    if (n < 1 || n > MAX_SPEAKERS) throw new InvalidRequestError("invalid_speakers", `${field}: must be between 1 and ${MAX_SPEAKERS}, got ${n}`);
    return n;
  };
  const minSpeakers = speakers("min_speakers");
  const maxSpeakers = speakers("max_speakers");
  if (minSpeakers !== undefined && maxSpeakers !== undefined && minSpeakers > maxSpeakers) {
    throw new InvalidRequestError("invalid_speakers", `min_speakers: ${minSpeakers} is more than max_speakers ${maxSpeakers}`);
  }
  return {
    model,
    translate,
    speakerDiarization,
    ...(language ? { language } : {}),
    ...(target ? { targetLanguage: target } : {}),
    ...(minSpeakers !== undefined ? { minSpeakers } : {}),
    ...(maxSpeakers !== undefined ? { maxSpeakers } : {}),
    ...decodingOf(src),
  };
}

/** How whisper decodes and where it hears speech, from the fields that choose it; undefined when none does. */
function decodingOf(src: OptionSource): Pick<JobOptions, "decoding" | "vad"> {
  const decoding: NonNullable<JobOptions["decoding"]> = {};
  const prompt = src.prompt();
  if (prompt) {
    if (prompt.text.length > MAX_PROMPT_CHARS)
      throw new InvalidRequestError(
        "invalid_prompt",
        `${prompt.fields}: at most ${MAX_PROMPT_CHARS} characters together, got ${prompt.text.length} (whisper keeps the last 224 tokens)`,
      );
    if (/[\u0000-\u0008\u000b-\u001f]/.test(prompt.text)) throw new InvalidRequestError("invalid_prompt", "prompt: control characters are not allowed");
    decoding.prompt = prompt.text;
  }
  const decimal = (field: DecimalField): number | undefined => {
    const n = src.decimal(field);
    if (n === undefined) return undefined;
    const { min, max, scale } = DECIMALS[field];
    if (!(n >= min / scale && n <= max / scale)) {
      throw new InvalidRequestError(`invalid_${field}` as const, `${field}: expected a number from ${min} to ${max}, got "${src.quote(field).slice(0, 40)}"`);
    }
    return n;
  };
  const set = <K extends keyof typeof decoding>(key: K, value: (typeof decoding)[K] | undefined) => {
    if (value !== undefined) decoding[key] = value;
  };
  set("temperature", decimal("temperature"));
  // whisper.cpp lists its fallback temperatures as t, t + step, … up to 1 in single precision: a tiny
  // step never gets there (the list grows until memory runs out), and a small one multiplies the
  // decodes (five per temperature above 0). 0 or 0.2 and up: at most six temperatures.
  const step = decimal("temperature_increment");
  if (step !== undefined && step !== 0 && step < MIN_TEMPERATURE_STEP) {
    throw new InvalidRequestError(
      "invalid_temperature_increment",
      `temperature_increment: expected 0 (no fallback) or a number from ${MIN_TEMPERATURE_STEP} to 1, got "${src.quote("temperature_increment")}"`,
    );
  }
  set("temperatureIncrement", step);
  set("entropyThreshold", decimal("entropy_threshold"));
  set("logprobThreshold", decimal("logprob_threshold"));
  set("noSpeechThreshold", decimal("no_speech_threshold"));
  const threshold = decimal("vad_threshold");
  const minSilenceSeconds = decimal("min_silence_ms");
  const vad = { ...(threshold !== undefined ? { threshold } : {}), ...(minSilenceSeconds !== undefined ? { minSilenceSeconds } : {}) };
  return { ...(Object.keys(decoding).length > 0 ? { decoding } : {}), ...(Object.keys(vad).length > 0 ? { vad } : {}) };
}

/** The job options the form's fields describe, the model one of `catalog`'s (whether it is installed is checked by the caller). */
export function parseJobFields(fields: Record<string, string>, catalog: WhisperCatalog = WhisperCatalog.builtin): JobOptions {
  return checkOptions(formSource(fields), catalog);
}

/**
 * Typed options (the fleet link's, `./wire.ts`) put through the same checks as the form's fields:
 * a node bounds what a scheduler sends it as it bounds its own uploads. Returns them as checked
 * (languages as whisper's codes; `fleet` is the caller's to set).
 */
export function checkJobOptions(options: JobOptions, catalog: WhisperCatalog = WhisperCatalog.builtin): JobOptions {
  return checkOptions(typedSource(options), catalog);
}

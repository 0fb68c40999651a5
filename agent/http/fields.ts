/**
 * Validation of the `POST /api/process` form fields (README, "Transcription"): each bad value is a 400 naming
 * its field. Unknown fields are ignored; booleans are `true`/`false` (also 1/0, yes/no).
 */
import { InvalidRequestError } from "../../core/errors.js";
import { DEFAULT_WHISPER_MODEL, isWhisperModelName, normalizeLanguage, WHISPER_MODELS } from "../../models/whisper.js";
import type { JobOptions } from "../jobs/index.js";

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

/** The job options the fields describe (the model's installation is checked by the caller). */
export function parseJobFields(fields: Record<string, string>): JobOptions {
  const model = fields.model?.trim() || DEFAULT_WHISPER_MODEL;
  if (!isWhisperModelName(model)) {
    throw new InvalidRequestError("invalid_model", `model: "${fields.model}" is not one of ${WHISPER_MODELS.map((m) => m.name).join(", ")}`);
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
  };
}

/**
 * The whisper model catalog of the transcription tool (README, "GET /api/models"): five sizes,
 * each a `ggml-<name>.bin` file in the agent's `--whisper-dir`, each speaking whisper's 99
 * languages. `memoryMb` is what a loaded model takes on this engine (weights plus one decoding
 * state), used by the memory budget before the real figure is known.
 */
export interface WhisperCatalogModel {
  name: WhisperModelName;
  /** The spec's size string. */
  size: string;
  languages: number;
  /** File name in the whisper directory. */
  file: string;
  /** Where `scripts/fetch-models` downloads it from (real deployments; never used by tests). */
  url: string;
  /** Approximate resident memory once loaded, in MiB. */
  memoryMb: number;
}

const NAMES = ["base", "small", "medium", "large", "large-v2"] as const;
export type WhisperModelName = (typeof NAMES)[number];

const HF = "https://huggingface.co/ggerganov/whisper.cpp/resolve/main";

export const WHISPER_MODELS: readonly WhisperCatalogModel[] = [
  { name: "base", size: "39MB", languages: 99, file: "ggml-base.bin", url: `${HF}/ggml-base.bin`, memoryMb: 390 },
  { name: "small", size: "244MB", languages: 99, file: "ggml-small.bin", url: `${HF}/ggml-small.bin`, memoryMb: 850 },
  { name: "medium", size: "769MB", languages: 99, file: "ggml-medium.bin", url: `${HF}/ggml-medium.bin`, memoryMb: 2100 },
  { name: "large", size: "1550MB", languages: 99, file: "ggml-large.bin", url: `${HF}/ggml-large-v3.bin`, memoryMb: 3900 },
  { name: "large-v2", size: "1550MB", languages: 99, file: "ggml-large-v2.bin", url: `${HF}/ggml-large-v2.bin`, memoryMb: 3900 },
];

/** The model used when a request names none. */
export const DEFAULT_WHISPER_MODEL: WhisperModelName = "base";

export function isWhisperModelName(name: string): name is WhisperModelName {
  return (NAMES as readonly string[]).includes(name);
}

export function whisperModel(name: WhisperModelName): WhisperCatalogModel {
  return WHISPER_MODELS.find((m) => m.name === name)!;
}

/** Whisper's 99 languages (code → English name), in whisper's own order. */
export const WHISPER_LANGUAGES: Readonly<Record<string, string>> = {
  en: "english", zh: "chinese", de: "german", es: "spanish", ru: "russian", ko: "korean", fr: "french", ja: "japanese",
  pt: "portuguese", tr: "turkish", pl: "polish", ca: "catalan", nl: "dutch", ar: "arabic", sv: "swedish", it: "italian",
  id: "indonesian", hi: "hindi", fi: "finnish", vi: "vietnamese", he: "hebrew", uk: "ukrainian", el: "greek", ms: "malay",
  cs: "czech", ro: "romanian", da: "danish", hu: "hungarian", ta: "tamil", no: "norwegian", th: "thai", ur: "urdu",
  hr: "croatian", bg: "bulgarian", lt: "lithuanian", la: "latin", mi: "maori", ml: "malayalam", cy: "welsh", sk: "slovak",
  te: "telugu", fa: "persian", lv: "latvian", bn: "bengali", sr: "serbian", az: "azerbaijani", sl: "slovenian", kn: "kannada",
  et: "estonian", mk: "macedonian", br: "breton", eu: "basque", is: "icelandic", hy: "armenian", ne: "nepali", mn: "mongolian",
  bs: "bosnian", kk: "kazakh", sq: "albanian", sw: "swahili", gl: "galician", mr: "marathi", pa: "punjabi", si: "sinhala",
  km: "khmer", sn: "shona", yo: "yoruba", so: "somali", af: "afrikaans", oc: "occitan", ka: "georgian", be: "belarusian",
  tg: "tajik", sd: "sindhi", gu: "gujarati", am: "amharic", yi: "yiddish", lo: "lao", uz: "uzbek", fo: "faroese",
  ht: "haitian creole", ps: "pashto", tk: "turkmen", nn: "nynorsk", mt: "maltese", sa: "sanskrit", lb: "luxembourgish",
  my: "myanmar", bo: "tibetan", tl: "tagalog", mg: "malagasy", as: "assamese", tt: "tatar", haw: "hawaiian", ln: "lingala",
  ha: "hausa", ba: "bashkir", jw: "javanese", su: "sundanese",
};

/** A language code as whisper knows it ("EN" → "en", "english" → "en"), or undefined. */
export function normalizeLanguage(value: string): string | undefined {
  const v = value.trim().toLowerCase();
  if (Object.hasOwn(WHISPER_LANGUAGES, v)) return v; // not `in`: "constructor" is in every object
  return Object.entries(WHISPER_LANGUAGES).find(([, name]) => name === v)?.[0];
}

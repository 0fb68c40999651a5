/**
 * The whisper model catalog of the transcription tool (README, "GET /api/models"): which names a
 * job may ask for, and where each file comes from. Every entry is a `ggml-*.bin` file in a model
 * hub repository (`{hub}/{repo}/resolve/{revision}/{file}`), pinned by its sha256, and is stored
 * under the same file name in the agent's `--whisper-dir`. `kiln models pull whisper:<name>` and
 * an instance's on-demand fetch refuse a file whose sha256 differs. Operators add or override
 * entries with `--whisper-catalog FILE` (config/whisper-catalog.ts).
 */
export interface WhisperCatalogModel {
  /** The name a job asks for (`model`). */
  name: WhisperModelName;
  /** The size string `/api/models` shows (the spec's, for the five original sizes). */
  size: string;
  /** Bytes of the file, as the hub lists it. */
  sizeBytes: number;
  /** Languages it speaks: 99, or 1 for the English-only `.en` models. */
  languages: number;
  /** Hub repository, `org/name`. */
  repo: string;
  /** File name in the repository, and in the whisper directory. */
  file: string;
  /** The file's sha256 (hex): a download with any other is refused. */
  sha256: string;
  /** Branch, tag or commit of the repository. Default "main". */
  revision?: string;
  /** Approximate resident memory once loaded, in MiB (the memory budget's guess before the real figure is known). */
  memoryMb: number;
}

/** A catalog name: a letter or digit, then letters, digits, `.`, `_` or `-` (it becomes no path of its own). */
export type WhisperModelName = string;
export const WHISPER_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/i;

const GGERGANOV = "ggerganov/whisper.cpp";
const MB = 1e6;

/**
 * The built-in entries: the spec's five sizes first, then the newer large models and the
 * English-only sizes. `large` is large-v3 (OpenAI's `large` since its release): both names are
 * served by one file.
 */
const BUILTIN: readonly WhisperCatalogModel[] = [
  { name: "base", size: "39MB", sizeBytes: 147_951_465, sha256: "60ed5bc3dd14eea856493d334349b405782ddcaf0028d4b5df4088345fba2efe", file: "ggml-base.bin", memoryMb: 390 },
  { name: "small", size: "244MB", sizeBytes: 487_601_967, sha256: "1be3a9b2063867b937e64e2ec7483364a79917e157fa98c5d94b5c1fffea987b", file: "ggml-small.bin", memoryMb: 850 },
  { name: "medium", size: "769MB", sizeBytes: 1_533_763_059, sha256: "6c14d5adee5f86394037b4e4e8b59f1673b6cee10e3cf0b11bbdbee79c156208", file: "ggml-medium.bin", memoryMb: 2100 },
  { name: "large", size: "1550MB", sizeBytes: 3_095_033_483, sha256: "64d182b440b98d5203c4f9bd541544d84c605196c4f7b845dfa11fb23594d1e2", file: "ggml-large-v3.bin", memoryMb: 3900 },
  { name: "large-v2", size: "1550MB", sizeBytes: 3_094_623_691, sha256: "9a423fe4d40c82774b6af34115b8b935f34152246eb19e80e376071d3f999487", file: "ggml-large-v2.bin", memoryMb: 3900 },
  { name: "large-v3", size: "1550MB", sizeBytes: 3_095_033_483, sha256: "64d182b440b98d5203c4f9bd541544d84c605196c4f7b845dfa11fb23594d1e2", file: "ggml-large-v3.bin", memoryMb: 3900 },
  { name: "large-v3-turbo", size: "809MB", sizeBytes: 1_624_555_275, sha256: "1fc70f774d38eb169993ac391eea357ef47c88757ef72ee5943879b7e8e2bc69", file: "ggml-large-v3-turbo.bin", memoryMb: 2000 },
  { name: "base.en", size: "39MB", sizeBytes: 147_964_211, sha256: "a03779c86df3323075f5e796cb2ce5029f00ec8869eee3fdfb897afe36c6d002", file: "ggml-base.en.bin", memoryMb: 390, languages: 1 },
  { name: "small.en", size: "244MB", sizeBytes: 487_614_201, sha256: "c6138d6d58ecc8322097e0f987c32f1be8bb0a18532a3f88f734d1bbf9c41e5d", file: "ggml-small.en.bin", memoryMb: 850, languages: 1 },
  { name: "medium.en", size: "769MB", sizeBytes: 1_533_774_781, sha256: "cc37e93478338ec7700281a7ac30a10128929eb8f427dda2e865faa8f6da4356", file: "ggml-medium.en.bin", memoryMb: 2100, languages: 1 },
].map((m) => ({ languages: 99, repo: GGERGANOV, ...m }));

/** An operator's entry (`--whisper-catalog`): what the file names; the rest is derived. */
export interface WhisperCatalogEntry {
  name: string;
  repo: string;
  file: string;
  sha256: string;
  size_bytes: number;
  languages: number;
  revision?: string;
}

/** The merged catalog a node serves: the built-in entries, then the operator's (one with a built-in name replaces it). */
export class WhisperCatalog {
  static readonly builtin = new WhisperCatalog(BUILTIN);

  private constructor(readonly models: readonly WhisperCatalogModel[]) {}

  /** This catalog with `entries` added, each replacing a model of the same name in place. */
  extend(entries: readonly WhisperCatalogEntry[]): WhisperCatalog {
    const models = [...this.models];
    for (const e of entries) {
      const model: WhisperCatalogModel = {
        name: e.name,
        size: `${Math.max(1, Math.round(e.size_bytes / MB))}MB`,
        sizeBytes: e.size_bytes,
        languages: e.languages,
        repo: e.repo,
        file: e.file,
        sha256: e.sha256.toLowerCase(),
        ...(e.revision ? { revision: e.revision } : {}),
        // the weights and one decoding state, as the built-in sizes measure
        memoryMb: Math.ceil((e.size_bytes / 1024 ** 2) * 1.3) + 200,
      };
      const at = models.findIndex((m) => m.name === e.name);
      if (at >= 0) models[at] = model;
      else models.push(model);
    }
    return new WhisperCatalog(models);
  }

  get(name: string): WhisperCatalogModel | undefined {
    return this.models.find((m) => m.name === name);
  }

  has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  get names(): string[] {
    return this.models.map((m) => m.name);
  }
}

/**
 * The file names a model may be installed under, the catalog's first: before the catalog named
 * repository files, every model was `ggml-<name>.bin` (so `large` was `ggml-large.bin`), and a file
 * an operator copied in under that name still serves.
 */
export function whisperFiles(model: WhisperCatalogModel): string[] {
  return [...new Set([model.file, `ggml-${model.name}.bin`])];
}

/** The model used when a request names none. */
export const DEFAULT_WHISPER_MODEL: WhisperModelName = "base";

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

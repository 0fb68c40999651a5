/**
 * The operator's whisper catalog (`--whisper-catalog FILE`): a JSON array of entries that add to
 * or replace the built-in ones (models/whisper.ts): fine-tuned or distilled ggml models, an
 * in-house mirror's repository, test weights.
 *
 * ```json
 * [{ "name": "large-v3-de", "repo": "acme/whisper-large-v3-german-ggml", "file": "ggml-large-v3-de.bin",
 *    "sha256": "64d1…", "size_bytes": 3095033483, "languages": 1, "revision": "v1" }]
 * ```
 */
import { z } from "zod";
import { loadJsonFile } from "./json-file.js";
import { WHISPER_NAME, WhisperCatalog, type WhisperCatalogEntry } from "../models/whisper.js";

/** One path segment of a repository: no `.` or `..`, nothing that reads as a path of its own. */
const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;

const ENTRY = z.strictObject({
  /** The name jobs ask for. */
  name: z.string().regex(WHISPER_NAME, "must be 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit"),
  /** `org/name` on the hub. */
  repo: z.string().refine((s) => s.split("/").length === 2 && s.split("/").every((p) => SEGMENT.test(p)), "must be org/name (letters, digits, '.', '_', '-')"),
  /** A file name at the repository's top, kept under the same name in --whisper-dir. */
  file: z.string().regex(SEGMENT, "must be a plain file name (letters, digits, '.', '_', '-'; no folders)"),
  /** The file's sha256, hex. */
  sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, "must be 64 hex digits"),
  /** Its size in bytes. */
  size_bytes: z.number().int().min(1),
  /** Languages it speaks: 99 for a multilingual model, 1 for an English-only one. */
  languages: z.number().int().min(1).max(99),
  /** A branch, tag or commit. Default "main". */
  revision: z
    .string()
    .refine((s) => s.split("/").every((p) => SEGMENT.test(p)), "must be a branch, tag or commit (letters, digits, '.', '_', '-', '/')")
    .optional(),
});

/** Reads a catalog file and merges it over the built-in catalog; throws an Error naming the file and the entry. */
export function loadWhisperCatalog(file: string): WhisperCatalog {
  const entries: WhisperCatalogEntry[] = loadJsonFile(file, z.array(ENTRY)).map(({ revision, ...e }) => ({ ...e, ...(revision ? { revision } : {}) }));
  const names = new Set<string>();
  for (const e of entries) {
    if (names.has(e.name)) throw new Error(`${file}: "${e.name}" is listed twice`);
    names.add(e.name);
  }
  const catalog = WhisperCatalog.builtin.extend(entries);
  // one file in --whisper-dir is one set of weights: two names for it must agree on its checksum
  for (const m of catalog.models) {
    const other = catalog.models.find((o) => o.file === m.file && o.sha256 !== m.sha256);
    if (other) throw new Error(`${file}: "${m.name}" and "${other.name}" both name ${m.file} with different sha256`);
  }
  return catalog;
}

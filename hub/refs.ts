/**
 * Model references, as `kiln models pull`, `--pull` and `--serve ID=…` take them:
 *
 * - `whisper:<name>`: a whisper catalog entry (models/whisper.ts, `--whisper-catalog`);
 * - `speech:<name>`: a speech model beside whisper (models/speech.ts: voice activity, diarization);
 * - `hf:<org>/<repo>/<path>.gguf` (optionally `#<revision>`): one GGUF file of a hub repository;
 *   one part of a split GGUF (`<name>-00002-of-00003.gguf`) names the whole set, as its first part;
 * - `hf:<org>/<repo>:<quant>`: the repository's GGUF of that quantization, which the hub's
 *   manifest names (the form node-llama-cpp and llama.cpp resolve).
 *
 * Every part is checked here before it goes into a URL or a file name: no part is `.` or `..`,
 * none holds a separator of its own.
 */
import { createHash } from "node:crypto";
import { PullError } from "./errors.js";
import { WHISPER_NAME } from "../models/whisper.js";

export type ModelRef =
  | { kind: "whisper"; ref: string; name: string }
  | { kind: "speech"; ref: string; name: string }
  | { kind: "gguf"; ref: string; org: string; repo: string; path: string; revision: string }
  | { kind: "gguf-quant"; ref: string; org: string; repo: string; quant: string };

/** One path segment: letters, digits, `.`, `_`, `-`, not starting with a dot. */
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;
const QUANT = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,31}$/;

const bad = (ref: string, why: string) =>
  new PullError("bad_ref", `"${ref}" is not a model reference: ${why} (expected whisper:<name>, speech:<name>, hf:<org>/<repo>/<file>.gguf or hf:<org>/<repo>:<quant>)`);

/** A relative path of plain segments (`a/b/c.gguf`), or undefined. */
export function safePath(path: string): string | undefined {
  const parts = path.split("/");
  return parts.every((p) => SEGMENT.test(p)) ? path : undefined;
}

export function parseRef(ref: string): ModelRef {
  const text = ref.trim();
  if (text.startsWith("whisper:")) {
    const name = text.slice("whisper:".length);
    if (!WHISPER_NAME.test(name)) throw bad(ref, "the whisper name is empty or has characters a catalog name cannot");
    return { kind: "whisper", ref: text, name };
  }
  if (text.startsWith("speech:")) {
    const name = text.slice("speech:".length);
    if (!WHISPER_NAME.test(name)) throw bad(ref, "the speech model's name is empty or has characters a catalog name cannot");
    return { kind: "speech", ref: text, name };
  }
  if (!text.startsWith("hf:")) throw bad(ref, 'it starts with none of "whisper:", "speech:" and "hf:"');
  const body = text.slice("hf:".length);
  const [org = "", repoAndQuant = "", ...rest] = body.split("/");
  if (!SEGMENT.test(org)) throw bad(ref, "the organization is missing or malformed");
  if (rest.length === 0) {
    const colon = repoAndQuant.indexOf(":");
    const repo = colon < 0 ? repoAndQuant : repoAndQuant.slice(0, colon);
    const quant = colon < 0 ? "" : repoAndQuant.slice(colon + 1);
    if (!SEGMENT.test(repo)) throw bad(ref, "the repository is missing or malformed");
    if (!QUANT.test(quant)) throw bad(ref, "name a file (hf:org/repo/file.gguf) or a quantization (hf:org/repo:Q4_K_M)");
    return { kind: "gguf-quant", ref: `hf:${org}/${repo}:${quant}`, org, repo, quant };
  }
  if (!SEGMENT.test(repoAndQuant)) throw bad(ref, "the repository is missing or malformed");
  const joined = rest.join("/");
  const hash = joined.indexOf("#");
  let path = hash < 0 ? joined : joined.slice(0, hash);
  const revision = hash < 0 ? "main" : joined.slice(hash + 1);
  if (!safePath(path)) throw bad(ref, "the file path has an empty, hidden or malformed part");
  if (!path.toLowerCase().endsWith(".gguf")) throw bad(ref, "the file is not a .gguf");
  if (!safePath(revision)) throw bad(ref, "the revision is malformed");
  const split = splitOf(path);
  if (split === null) throw bad(ref, "the split GGUF's part number is 0 or beyond its count");
  // any part names the set, by its first part (the one llama.cpp loads; it finds the others by name)
  if (split) path = partPath(split, 1);
  return { kind: "gguf", ref: `hf:${org}/${repoAndQuant}/${path}${revision === "main" ? "" : `#${revision}`}`, org, repo: repoAndQuant, path, revision };
}

/**
 * A part of a split GGUF by its name: llama.cpp's gguf-split writes `<prefix>-%05d-of-%05d.gguf`, and
 * llama.cpp finds parts 2..N of a model from its first part's path by that pattern. `spelling` keeps
 * the name's own case of `-of-` and `.gguf` (a hub path is asked for as the repository spells it).
 */
export interface SplitPart {
  prefix: string;
  /** 1-based. */
  part: number;
  count: number;
  spelling: { of: string; ext: string };
}

const SPLIT = /^(.*)-(\d{5})(-of-)(\d{5})(\.gguf)$/i;

/** The split part a name (or path) is; undefined when it is no split part; null when its numbers are impossible (part 0, or beyond the count). */
export function splitOf(name: string): SplitPart | undefined | null {
  const m = SPLIT.exec(name);
  if (!m) return undefined;
  const part = Number(m[2]);
  const count = Number(m[4]);
  if (part < 1 || part > count) return null;
  return { prefix: m[1]!, part, count, spelling: { of: m[3]!, ext: m[5]! } };
}

/** The name (or path) of part `part` of the set `split` belongs to. */
export function partPath(split: SplitPart, part: number): string {
  return `${split.prefix}-${String(part).padStart(5, "0")}${split.spelling.of}${String(split.count).padStart(5, "0")}${split.spelling.ext}`;
}

/** Every name of the set a file belongs to, first part first: the file alone unless it is a part of a split GGUF. */
export function setOf(name: string): string[] {
  const split = splitOf(name);
  return split ? Array.from({ length: split.count }, (_, i) => partPath(split, i + 1)) : [name];
}

/** The hub paths of what a GGUF reference names: the file, or every part of a split GGUF (first part first). */
export function ggufHubPaths(ref: Extract<ModelRef, { kind: "gguf" }>): string[] {
  return setOf(ref.path);
}

/**
 * The file names a GGUF is kept under in --models-dir: readable (`hf_<org>_<repo>_<file stem>`) and
 * unambiguous: a digest of the file's place (repository, revision, path) tells apart two files the
 * readable part alone would confuse (`a/b_c/x.gguf` and `a/b/c_x.gguf`, `Q4/model.gguf` and `Q8/model.gguf`).
 * One name for a single file (`hf_<org>_<repo>_<stem>.<digest>.gguf`); for a split GGUF one per part,
 * first part first, each keeping llama.cpp's split pattern after one prefix and the set's one digest
 * (`hf_<org>_<repo>_<stem>.<digest>-00002-of-00003.gguf`): llama.cpp finds the other parts from the first.
 */
export function ggufFileNames(ref: Extract<ModelRef, { kind: "gguf" }>): string[] {
  const place = createHash("sha256").update(`${ref.org}/${ref.repo}@${ref.revision}/${ref.path}`).digest("hex").slice(0, 12);
  const file = ref.path.split("/").at(-1)!;
  const split = splitOf(file);
  const stem = (split ? split.prefix : file).replace(/\.gguf$/i, "");
  const prefix = `hf_${ref.org}_${ref.repo}_${stem}`.slice(0, 200) + `.${place}`;
  if (!split) return [`${prefix}.gguf`];
  return setOf(partPath({ ...split, prefix, spelling: { of: "-of-", ext: ".gguf" } }, 1));
}

/** The file name a GGUF is kept under (a split GGUF's: its first part's). */
export function ggufFileName(ref: Extract<ModelRef, { kind: "gguf" }>): string {
  return ggufFileNames(ref)[0]!;
}

/**
 * Model references, as `kiln models pull`, `--pull` and `--serve ID=…` take them:
 *
 * - `whisper:<name>`: a whisper catalog entry (models/whisper.ts, `--whisper-catalog`);
 * - `speech:<name>`: a speech model beside whisper (models/speech.ts: voice activity, diarization);
 * - `hf:<org>/<repo>/<path>.gguf` (optionally `#<revision>`): one GGUF file of a hub repository;
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
  const path = hash < 0 ? joined : joined.slice(0, hash);
  const revision = hash < 0 ? "main" : joined.slice(hash + 1);
  if (!safePath(path)) throw bad(ref, "the file path has an empty, hidden or malformed part");
  if (!path.toLowerCase().endsWith(".gguf")) throw bad(ref, "the file is not a .gguf");
  if (!safePath(revision)) throw bad(ref, "the revision is malformed");
  if (/-\d{5}-of-\d{5}\.gguf$/i.test(path)) {
    throw new PullError(
      "not_supported",
      `"${ref}" is one part of a split GGUF, which Kiln does not pull yet: pick a single-file quantization, or merge the parts with llama-gguf-split`,
    );
  }
  return { kind: "gguf", ref: `hf:${org}/${repoAndQuant}/${path}${revision === "main" ? "" : `#${revision}`}`, org, repo: repoAndQuant, path, revision };
}

/** Refuses one part of a split GGUF (`-00001-of-00003.gguf`), named directly or by a manifest. */
export function refuseSplit(path: string, ref: string): void {
  if (/-\d{5}-of-\d{5}\.gguf$/i.test(path)) {
    throw new PullError(
      "not_supported",
      `"${ref}" is one part of a split GGUF (${path}), which Kiln does not pull yet: pick a single-file quantization, or merge the parts with llama-gguf-split`,
    );
  }
}

/**
 * The file name a GGUF is kept under in --models-dir: readable (`hf_<org>_<repo>_<file stem>`) and
 * unambiguous: a digest of the file's place (repository, revision, path) tells apart two files the
 * readable part alone would confuse (`a/b_c/x.gguf` and `a/b/c_x.gguf`, `Q4/model.gguf` and `Q8/model.gguf`).
 */
export function ggufFileName(ref: Extract<ModelRef, { kind: "gguf" }>): string {
  const place = createHash("sha256").update(`${ref.org}/${ref.repo}@${ref.revision}/${ref.path}`).digest("hex").slice(0, 12);
  const stem = ref.path
    .split("/")
    .at(-1)!
    .replace(/\.gguf$/i, "");
  return `hf_${ref.org}_${ref.repo}_${stem}`.slice(0, 200) + `.${place}.gguf`;
}

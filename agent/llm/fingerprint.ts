/**
 * `system_fingerprint`: which weights and which build answered. OpenAI's changes when its backend
 * does; Kiln's is a digest of the GGUF file (its size and its first and last 4 MiB: a file of tens
 * of gigabytes is not read whole at every start) and of the llama.cpp build that runs it. A split
 * GGUF's is over every part so (the count of parts, then each part's size and ends).
 */
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import { splitParts } from "./split.js";

/** Bytes read from each end of the file. */
const SAMPLE_BYTES = 4 * 1024 * 1024;

/** `fp_` and 12 hex digits of SHA-256 over the file's size, its two ends and `build` (a split GGUF: every part's). */
export async function modelFingerprint(path: string, build: string): Promise<string> {
  const parts = splitParts(path);
  const hash = createHash("sha256");
  if (parts.length > 1) hash.update(`${parts.length} parts\n`);
  for (const [i, part] of parts.entries()) await sample(part, hash, i === 0 ? build : undefined);
  return `fp_${hash.digest("hex").slice(0, 12)}`;
}

/** Adds a file's size (with `build` after it, for the first file), then its two ends, to `hash`. */
async function sample(path: string, hash: ReturnType<typeof createHash>, build: string | undefined): Promise<void> {
  const file = await open(path, "r");
  try {
    const { size } = await file.stat();
    hash.update(build === undefined ? `${size}\n` : `${size}\n${build}\n`);
    const read = async (position: number, length: number) => {
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await file.read(buffer, 0, length, position);
      hash.update(buffer.subarray(0, bytesRead));
    };
    await read(0, Math.min(SAMPLE_BYTES, size));
    if (size > SAMPLE_BYTES) await read(Math.max(SAMPLE_BYTES, size - SAMPLE_BYTES), Math.min(SAMPLE_BYTES, size - SAMPLE_BYTES));
  } finally {
    await file.close();
  }
}

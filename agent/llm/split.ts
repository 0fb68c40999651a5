/**
 * Split GGUFs on disk: a model too large for one file is published as parts named as llama.cpp's
 * gguf-split writes them, `<prefix>-%05d-of-%05d.gguf`. llama.cpp loads such a model from its first
 * part only, and finds parts 2..N itself by that name pattern beside it.
 */

const SPLIT = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;

/** Every part of the split GGUF `path` is a part of (first part first), or `[path]` for a single file. */
export function splitParts(path: string): string[] {
  const m = SPLIT.exec(path);
  const part = Number(m?.[2]);
  const count = Number(m?.[3]);
  if (!m || part < 1 || part > count) return [path];
  return Array.from({ length: count }, (_, i) => `${m[1]}-${String(i + 1).padStart(5, "0")}-of-${m[3]}.gguf`);
}

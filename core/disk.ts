import { stat, statfs } from "node:fs/promises";

/** Free bytes on the file system holding `dir` (what an unprivileged writer may use). */
export async function freeBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

/** Whether `path` is a regular file with bytes in it (a model file counts as installed then). */
export async function nonEmptyFile(path: string): Promise<boolean> {
  const s = await stat(path).catch(() => undefined);
  return s !== undefined && s.isFile() && s.size > 0;
}

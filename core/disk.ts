import { statfs } from "node:fs/promises";

/** Free bytes on the file system holding `dir` (what an unprivileged writer may use). */
export async function freeBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

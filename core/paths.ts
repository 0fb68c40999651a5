import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * `preferred` when that file or folder exists, else `fallback`. Compiled code and its TypeScript
 * sources sit in different trees: a worker module exists only in dist/, static assets only in
 * the sources; vitest runs the sources, `kiln` runs dist/.
 */
export function existingOr(preferred: URL, fallback: URL): URL {
  return existsSync(fileURLToPath(preferred)) ? preferred : fallback;
}

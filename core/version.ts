/** Kiln's version, from its package.json (the one place it is written). */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

function readVersion(): string {
  // core/ in the sources, dist/core/ when built: the package's root is one or two folders up
  for (let dir = dirname(fileURLToPath(import.meta.url)), i = 0; i < 3; dir = dirname(dir), i++) {
    const file = join(dir, "package.json");
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
    if (pkg.name === "kiln" && pkg.version) return pkg.version;
  }
  return "0.0.0-unknown";
}

/** The running Kiln's version (package.json's `version`). */
export const KILN_VERSION = readVersion();

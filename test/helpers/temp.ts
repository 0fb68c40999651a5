/** A new temporary folder of this run (global-setup.ts points TMPDIR into one folder removed at the end). */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const tempDir = (): string => mkdtempSync(join(tmpdir(), "kiln-test-"));

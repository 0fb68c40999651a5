/**
 * Writes the fabricated test models: `node dist/scripts/make-test-models.js [--out DIR] [--bench]`.
 *
 * - `tiny-chat.gguf`: ~90 K parameters, loads and generates in milliseconds (the suite's model).
 * - `bench-45m.gguf` (with `--bench`): ~45 M parameters, big enough that compute dominates (benchmarks).
 *
 * Files are seeded, so the same options write byte-identical files; existing files are kept.
 */
import { mkdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { writeTinyLlama, type TinyLlamaOptions } from "./lib/tiny-llama.js";

export const TEST_MODELS = {
  tiny: { file: "tiny-chat.gguf", options: { embedding: 64, layers: 2, heads: 4, name: "kiln-tiny-chat" } },
  bench: { file: "bench-45m.gguf", options: { embedding: 768, layers: 6, heads: 12, feedForward: 2048, name: "kiln-bench-45m" } },
} satisfies Record<string, { file: string; options: TinyLlamaOptions }>;

/** The default folder for fabricated models: `.kiln/test-models` under the project root. */
export function defaultModelDir(root = process.cwd()): string {
  return resolve(root, ".kiln", "test-models");
}

/** Writes a model unless it exists already; returns its path. */
export async function ensureTestModel(kind: keyof typeof TEST_MODELS, dir = defaultModelDir()): Promise<string> {
  const { file, options } = TEST_MODELS[kind];
  const path = join(dir, file);
  const exists = await stat(path).then(() => true, () => false);
  if (!exists) {
    await mkdir(dir, { recursive: true });
    await writeTinyLlama(path, options);
  }
  return path;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const out = args[args.indexOf("--out") + 1];
  const dir = args.includes("--out") && out ? resolve(out) : defaultModelDir();
  const kinds: (keyof typeof TEST_MODELS)[] = args.includes("--bench") ? ["tiny", "bench"] : ["tiny"];
  for (const kind of kinds) console.log(await ensureTestModel(kind, dir));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => { console.error(err); process.exit(1); });
}

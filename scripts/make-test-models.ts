/**
 * Writes the fabricated test models (fabricate/models.ts): `node dist/scripts/make-test-models.js [--out DIR] [--bench] [--realistic VOCAB.gguf]`.
 */
import { mkdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  defaultModelDir,
  ensureTestModel,
  ensureTestSpeechModels,
  ensureTestSplitModel,
  REALISTIC_LLAMA,
  TEST_MODELS,
  TEST_SPEECH,
  writeWithVocabulary,
} from "../fabricate/index.js";

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const out = args[args.indexOf("--out") + 1];
  const dir = args.includes("--out") && out ? resolve(out) : defaultModelDir();
  const kinds: (keyof typeof TEST_MODELS)[] = args.includes("--bench") ? ["tiny", "bench"] : ["tiny"];
  for (const kind of kinds) console.log(await ensureTestModel(kind, dir));
  for (const part of await ensureTestSplitModel(dir)) console.log(part);
  const vocab = args.includes("--realistic") ? args[args.indexOf("--realistic") + 1] : undefined;
  if (vocab) {
    const path = join(dir, REALISTIC_LLAMA.file);
    if (!(await exists(path))) {
      await mkdir(dir, { recursive: true });
      const { parameters } = await writeWithVocabulary(path, resolve(vocab));
      console.error(`${REALISTIC_LLAMA.file}: ${(parameters / 1e9).toFixed(2)} B parameters`);
    }
    console.log(path);
  }
  const speech = await ensureTestSpeechModels(dir);
  console.log(join(speech.whisperDir, TEST_SPEECH.whisperFile));
  console.log(speech.vadModel);
  console.log(speech.segmentationModel);
  console.log(speech.embeddingModel);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}

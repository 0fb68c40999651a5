/** Fabricates the test models once per run; subprocess suites need the compiled CLI in dist/. */
import { existsSync } from "node:fs";
import { ensureTestModel, ensureTestSpeechModels } from "../../scripts/make-test-models.js";

export default async function setup(): Promise<void> {
  await ensureTestModel("tiny");
  await ensureTestSpeechModels();
  if (!existsSync("dist/cli/index.js")) throw new Error("dist/ is missing: run `npm test` (which builds first) or `npm run build`");
  if (!process.env.KILN_TEST_DATA) console.log("[kiln] KILN_TEST_DATA is not set: suites that need ../shared/data (stories260K.gguf, silero_vad.onnx, jfk.wav, en-60s.wav) are skipped");
}

/**
 * Word error rate of the agent's transcription pipeline (ffmpeg → Silero VAD → whisper → words)
 * for a given whisper model, on `jfk.wav` against its reference by default.
 *
 *   npm run eval:asr -- --model /path/to/ggml-base.bin [--audio FILE --reference "TEXT"] [--vad silero_vad.onnx] [--language en]
 *
 * Real whisper weights cannot be downloaded on the development machines; the script runs wherever
 * they are (`kiln models pull whisper:base`, or any ggml-*.bin). Without --audio it needs KILN_TEST_DATA.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, symlinkSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Transcriber, WhisperPool } from "../agent/asr/index.js";
import { createLogger } from "../core/log.js";
import { argValue } from "./lib/cli.js";
import { wordErrorRate } from "./lib/wer.js";

export const JFK_REFERENCE = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country.";

/** Serves one ggml file as the catalog's "base" from a scratch whisper directory. */
export function scratchWhisperDir(model: string): string {
  const dir = mkdtempSync(join(tmpdir(), "kiln-asr-"));
  try {
    symlinkSync(resolve(model), join(dir, "ggml-base.bin"));
  } catch {
    copyFileSync(model, join(dir, "ggml-base.bin"));
  }
  return dir;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const data = process.env.KILN_TEST_DATA;
  const model = argValue(argv, "--model");
  const audio = argValue(argv, "--audio") ?? (data ? join(data, "audio", "jfk.wav") : undefined);
  const reference = argValue(argv, "--reference") ?? (argValue(argv, "--audio") ? undefined : JFK_REFERENCE);
  const vad = argValue(argv, "--vad") ?? (data ? join(data, "models", "silero_vad.onnx") : undefined);
  if (!model || !audio || !reference || !vad || !existsSync(model)) {
    console.error("usage: eval-asr --model ggml-*.bin [--audio FILE --reference TEXT] [--vad silero_vad.onnx] [--language xx]\n(the defaults need KILN_TEST_DATA)");
    process.exit(2);
  }
  const logger = createLogger("eval-asr", "warn");
  const parallel = Math.min(4, cpus().length);
  const whisper = new WhisperPool({
    dir: scratchWhisperDir(model),
    compute: "auto",
    memoryBudgetMb: 64 * 1024,
    parallel,
    threads: Math.max(1, Math.floor(cpus().length / parallel)),
    logger,
  });
  const transcriber = new Transcriber({ whisper, vad: { model: vad }, maxAudioSeconds: 4 * 3600, logger });
  const work = mkdtempSync(join(tmpdir(), "kiln-eval-"));
  mkdirSync(work, { recursive: true });
  const language = argValue(argv, "--language") ?? "en";
  const started = Date.now();
  const transcript = await transcriber.run({ input: audio, displayName: audio, workDir: join(work, "job"), model: "base", translate: false, language }, () => undefined);
  const seconds = (Date.now() - started) / 1000;
  await whisper.dispose();
  const r = wordErrorRate(reference, transcript.text);
  console.log(`model:      ${model}`);
  console.log(`audio:      ${audio} (${transcript.duration.toFixed(1)} s, transcribed in ${seconds.toFixed(2)} s)`);
  console.log(`reference:  ${reference}`);
  console.log(`hypothesis: ${transcript.text}`);
  console.log(`WER:        ${(r.wer * 100).toFixed(1)}%  (S ${r.substitutions}, D ${r.deletions}, I ${r.insertions} of ${r.referenceWords} words)`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}

/**
 * Transcription speed: the agent's pipeline against whisper.cpp's own command-line program,
 * `whisper-cli`, built from the same sources (the whisper.cpp Kiln vendors, ggml of the llama.cpp
 * release node-llama-cpp bundles; `build-whisper --cli`) on the same model, audio and threads,
 * measured in one run.
 *
 *   npm run bench:asr -- [--gpu] [--model ggml-*.bin] [--audio FILE] [--threads N] [--parallel P] [--rounds R] [--vad silero_vad.onnx]
 *
 * whisper-cli is built as whisper.cpp builds itself (ggml compiled in for this CPU, OpenMP where
 * found); Kiln's addon runs on node-llama-cpp's prebuilt ggml backends (Kiln's shared-threadpool
 * CPU backend where installed). Both decode greedy without temperature fallback (random-weight
 * models trip it on every window, which would measure the fallback only) and without carrying text
 * between windows; whisper-cli decodes the whole file in 30 s windows, the agent skips silence by
 * voice activity and decodes chunks on P parallel states of threads/P each. Model load time is
 * left out of both (whisper-cli reports it; the agent's is warm). Target (issue 3): agent ≥ 1.0×.
 *
 * `--gpu` (issue 19, on a machine with CUDA and nvcc): whisper-cli built with CUDA, the agent with
 * `--gpu cuda`, and the agent on the CPU as well; targets: agent on CUDA ≥ 1.0× whisper-cli on
 * CUDA and ≥ 5× the agent on the CPU.
 *
 * Defaults: a fabricated whisper (random weights, so the words are noise but the compute is the
 * real size's: tiny's shape on the CPU, small's with --gpu) and `en-60s.wav` from KILN_TEST_DATA with
 * Silero VAD, else 60 s of fabricated tone bursts with the energy VAD.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Transcriber, WhisperPool } from "../agent/asr/index.js";
import type { WhisperCompute } from "../agent/asr/engine/backend.js";
import { ffmpegPath } from "../agent/asr/ffmpeg.js";
import { createLogger } from "../core/log.js";
import { buildTools } from "./build-llama.js";
import { buildWhisper, buildWhisperCli } from "./build-whisper.js";
import { argValue, median } from "./lib/cli.js";
import { makeAudio, toneBursts } from "./lib/media.js";
import { writeTinyWhisper, type TinyWhisperOptions } from "../fabricate/tiny-whisper.js";
import { scratchWhisperDir } from "./eval-asr.js";
import { defaultModelDir, ensureTestSpeechModels } from "../fabricate/index.js";

/** whisper-cli's own timings on `wav`: total minus load, in seconds. */
function runCli(bin: string, model: string, wav: string, threads: number): number {
  const res = spawnSync(bin, ["-m", model, "-f", wav, "-t", String(threads), "-bs", "1", "-bo", "5", "-mc", "0", "-nf"], { encoding: "utf8", maxBuffer: 64 * 1024 ** 2 });
  if (res.status !== 0) throw new Error(`whisper-cli failed: ${res.stderr.slice(-500)}`);
  const ms = (name: string) => Number(new RegExp(`${name} time =\\s+([\\d.]+) ms`).exec(res.stderr)?.[1]);
  return (ms("total") - ms("load")) / 1000;
}

/** The fabricated model's shape: whisper tiny's or small's (random weights). */
const SHAPES: Record<"tiny" | "small", TinyWhisperOptions> = { tiny: { state: 384, heads: 6, layers: 4 }, small: { state: 768, heads: 12, layers: 12 } };

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const data = process.env.KILN_TEST_DATA;
  const threads = Number(argValue(argv, "--threads") ?? cpus().length);
  const parallel = Number(argValue(argv, "--parallel") ?? Math.min(4, threads));
  const rounds = Number(argValue(argv, "--rounds") ?? 3);
  const gpu = argv.includes("--gpu");
  let model = argValue(argv, "--model");
  if (!model) {
    const shape = gpu ? "small" : "tiny";
    model = join(defaultModelDir(), "whisper-bench", `ggml-${shape}-size.bin`);
    if (!existsSync(model)) {
      mkdirSync(dirname(model), { recursive: true });
      await writeTinyWhisper(model, SHAPES[shape]);
    }
  }
  const work = mkdtempSync(join(tmpdir(), "kiln-bench-asr-"));
  let audio = argValue(argv, "--audio") ?? (data ? join(data, "audio", "en-60s.wav") : undefined);
  let vad = argValue(argv, "--vad") ?? (data ? join(data, "models", "silero_vad.onnx") : undefined);
  if (!audio || !vad) {
    audio = join(work, "tones.wav");
    makeAudio(audio, toneBursts(60));
    vad = (await ensureTestSpeechModels()).vadModel;
  }
  const wav = join(work, "audio-16k.wav");
  execFileSync(ffmpegPath(), ["-v", "error", "-y", "-i", audio, "-ac", "1", "-ar", "16000", "-c:a", "pcm_s16le", wav]);

  if (gpu) buildTools({ cuda: true }); // with it, node-llama-cpp's CUDA module (a packed project lacks the 159 MB prebuilt)
  buildWhisper(); // the addon for every prebuilt folder (a no-op when installed)
  const cli = buildWhisperCli({ cuda: gpu });

  const logger = createLogger("bench-asr", "warn");
  const dir = scratchWhisperDir(model);
  /** Kiln's pipeline with whisper on `compute`: a warm-up run, then `rounds` timed ones. */
  const agent = async (compute: WhisperCompute, rounds: number) => {
    const whisper = new WhisperPool({
      dir,
      compute,
      memoryBudgetMb: 64 * 1024,
      parallel,
      threads: Math.max(1, Math.floor(threads / parallel)),
      temperatureFallback: false,
      logger,
    });
    const backend = await whisper.backend();
    if (compute !== "cpu" && !backend.gpu) throw new Error(`whisper found no GPU through node-llama-cpp's ${compute} binaries`);
    const transcriber = new Transcriber({ whisper, vad: { model: vad }, maxAudioSeconds: 4 * 3600, logger });
    const once = async (i: number) => {
      const started = Date.now();
      const t = await transcriber.run({ input: wav, displayName: "bench", workDir: join(work, `job-${compute}-${i}`), model: "base", translate: false }, () => undefined);
      return { seconds: (Date.now() - started) / 1000, duration: t.duration, words: t.segments.reduce((n, seg) => n + seg.words.length, 0) };
    };
    const warm = await once(-1); // loads the model
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) times.push((await once(r)).seconds);
    await whisper.dispose();
    return { seconds: median(times), duration: warm.duration, words: warm.words, devices: backend.devices.map((d) => d.description) };
  };
  const cliTimes: number[] = [];
  for (let r = 0; r < rounds; r++) cliTimes.push(runCli(cli, model, wav, threads));
  const onCompute = await agent(gpu ? "cuda" : "cpu", rounds);
  const onCpu = gpu ? await agent("cpu", 1) : onCompute;
  const c = median(cliTimes);
  const { duration } = onCompute;
  const where = gpu ? `CUDA (${onCompute.devices.join(", ")})` : "CPU";
  console.log(`\naudio ${audio} (${duration.toFixed(1)} s), model ${model}, ${threads} threads, agent parallel ${parallel}, ${rounds} rounds (median), on ${where}`);
  console.log(`whisper-cli:          ${c.toFixed(2)} s  RTF ${(c / duration).toFixed(3)}`);
  console.log(
    `kiln pipeline:        ${onCompute.seconds.toFixed(2)} s  RTF ${(onCompute.seconds / duration).toFixed(3)}  (ffmpeg decode + VAD + whisper; ${onCompute.words} words)`,
  );
  if (gpu) console.log(`kiln pipeline on CPU: ${onCpu.seconds.toFixed(2)} s  RTF ${(onCpu.seconds / duration).toFixed(3)}  (1 round)`);
  console.log(`speed ratio (whisper-cli time / kiln time): ${(c / onCompute.seconds).toFixed(2)}×  (target ≥ 1.0)`);
  if (gpu) console.log(`kiln CUDA vs kiln CPU: ${(onCpu.seconds / onCompute.seconds).toFixed(2)}×  (target ≥ 5)`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}

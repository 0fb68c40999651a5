/**
 * Transcription speed: the agent's pipeline against whisper.cpp's own command-line program,
 * built from the same vendored source (smart-whisper's whisper.cpp) with the same flags, on the
 * same model, audio and threads, measured in one run.
 *
 *   npm run bench:asr -- [--model ggml-*.bin] [--audio FILE] [--threads N] [--parallel P] [--rounds R] [--vad silero_vad.onnx]
 *
 * whisper.cpp's Makefile compiles with -march=native, so the addon is rebuilt with
 * `-O3 -march=native` first (`build-whisper --native`; run `npm run build:whisper -- --force` to
 * go back to the portable build), and `main` is built without OpenMP so both use ggml's own
 * threads. `main` decodes the whole file in 30 s windows, greedy, without temperature fallback on both
 * sides (random-weight models trip it on every window, which would measure the fallback only);
 * the agent skips silence by voice activity and decodes chunks on P parallel states of
 * threads/P each. Model load time is left out of both (main reports it; the agent's is warm).
 * Target (issue 3): agent ≥ 1.0× main's speed.
 *
 * Defaults: a fabricated tiny-size whisper (state 384, 4 layers; random weights, so the words are
 * noise but the compute is a tiny model's) and `en-60s.wav` from KILN_TEST_DATA with Silero VAD,
 * else 60 s of fabricated tone bursts with the energy VAD.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { Transcriber, WhisperPool } from "../agent/asr/index.js";
import { ffmpegPath } from "../agent/asr/ffmpeg.js";
import { createLogger } from "../core/log.js";
import { buildWhisper } from "./build-whisper.js";
import { argValue, median } from "./lib/cli.js";
import { writeTinyWhisper } from "./lib/tiny-whisper.js";
import { scratchWhisperDir } from "./eval-asr.js";
import { defaultModelDir, ensureTestSpeechModels } from "./make-test-models.js";

const require = createRequire(import.meta.url);

/** Builds whisper.cpp's `main` from a copy of the vendored source; returns its path. */
function buildMain(): string {
  const src = join(dirname(require.resolve("smart-whisper/package.json")), "whisper.cpp");
  const dir = resolve(".kiln", "bench", "whisper.cpp");
  const main = join(dir, "main");
  if (existsSync(main)) return main;
  mkdirSync(dirname(dir), { recursive: true });
  cpSync(src, dir, { recursive: true });
  mkdirSync(join(dir, "scripts"), { recursive: true });
  writeFileSync(join(dir, "scripts", "get-flags.mk"), "GF_CC := $(CC)\nGF_CXX := $(CXX)\n"); // left out of the npm package
  console.log("building whisper.cpp main (once, into .kiln/bench) …");
  const res = spawnSync("make", ["-j", String(cpus().length), "main"], { cwd: dir, stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, GGML_NO_OPENMP: "1" } });
  if (res.status !== 0) throw new Error("building whisper.cpp main failed");
  return main;
}

/** main's own timings: total minus load, in seconds. */
function runMain(main: string, model: string, wav: string, threads: number): number {
  const res = spawnSync(main, ["-m", model, "-f", wav, "-t", String(threads), "-bs", "1", "-bo", "5", "-mc", "0", "-nf"], { encoding: "utf8", maxBuffer: 64 * 1024 ** 2 });
  if (res.status !== 0) throw new Error(`main failed: ${res.stderr.slice(-500)}`);
  const ms = (name: string) => Number(new RegExp(`${name} time =\\s+([\\d.]+) ms`).exec(res.stderr)?.[1]);
  return (ms("total") - ms("load")) / 1000;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const data = process.env.KILN_TEST_DATA;
  const threads = Number(argValue(argv, "--threads") ?? cpus().length);
  const parallel = Number(argValue(argv, "--parallel") ?? Math.min(4, threads));
  const rounds = Number(argValue(argv, "--rounds") ?? 3);
  let model = argValue(argv, "--model");
  if (!model) {
    model = join(defaultModelDir(), "whisper-bench", "ggml-tiny-size.bin");
    if (!existsSync(model)) {
      mkdirSync(dirname(model), { recursive: true });
      await writeTinyWhisper(model, { state: 384, heads: 6, layers: 4 });
    }
  }
  const work = mkdtempSync(join(tmpdir(), "kiln-bench-asr-"));
  let audio = argValue(argv, "--audio") ?? (data ? join(data, "audio", "en-60s.wav") : undefined);
  let vad = argValue(argv, "--vad") ?? (data ? join(data, "models", "silero_vad.onnx") : undefined);
  if (!audio || !vad) {
    audio = join(work, "tones.wav");
    execFileSync(ffmpegPath(), ["-v", "error", "-y", "-f", "lavfi", "-i", "aevalsrc=0.4*sin(2*PI*440*t)*gt(mod(t\\,3)\\,1):s=16000:d=60", audio]);
    vad = (await ensureTestSpeechModels()).vadModel;
  }
  const wav = join(work, "audio-16k.wav");
  execFileSync(ffmpegPath(), ["-v", "error", "-y", "-i", audio, "-ac", "1", "-ar", "16000", "-c:a", "pcm_s16le", wav]);

  if (buildWhisper({ flags: "-O3 -march=native" })) console.log("rebuilt smart-whisper with -O3 -march=native to match whisper.cpp's Makefile");
  const mainBin = buildMain();

  const logger = createLogger("bench-asr", "warn");
  const whisper = new WhisperPool({ dir: scratchWhisperDir(model), gpu: false, memoryBudgetMb: 64 * 1024, parallel, threads: Math.max(1, Math.floor(threads / parallel)), temperatureFallback: false, logger });
  const transcriber = new Transcriber({ whisper, vad: { model: vad }, maxAudioSeconds: 4 * 3600, logger });
  const runAgent = async (i: number) => {
    const started = Date.now();
    const t = await transcriber.run({ input: wav, displayName: "bench", workDir: join(work, `job-${i}`), model: "base", translate: false }, () => undefined);
    return { seconds: (Date.now() - started) / 1000, duration: t.duration };
  };
  const { duration } = await runAgent(-1); // warm: loads the model
  const mainTimes: number[] = [];
  const agentTimes: number[] = [];
  for (let r = 0; r < rounds; r++) {
    mainTimes.push(runMain(mainBin, model, wav, threads));
    agentTimes.push((await runAgent(r)).seconds);
  }
  await whisper.dispose();
  const m = median(mainTimes);
  const a = median(agentTimes);
  console.log(`\naudio ${audio} (${duration.toFixed(1)} s), model ${model}, ${threads} threads, agent parallel ${parallel}, ${rounds} rounds (median)`);
  console.log(`whisper.cpp main: ${m.toFixed(2)} s  RTF ${(m / duration).toFixed(3)}`);
  console.log(`kiln pipeline:    ${a.toFixed(2)} s  RTF ${(a / duration).toFixed(3)}  (ffmpeg decode + VAD + whisper)`);
  console.log(`speed ratio (main time / kiln time): ${(m / a).toFixed(2)}×  (target ≥ 1.0)`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => { console.error(err); process.exit(1); });
}

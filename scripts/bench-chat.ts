/**
 * Chat benchmark, every side measured in one run on the same GGUF file and machine:
 *
 *   npm run bench:chat -- [--model PATH | --bench-model] [--threads N] [--tokens N] [--rounds N] [--streams 1,2,4,8] [--no-reference]
 *
 * - direct: Kiln's LLM engine in this process (node-llama-cpp, the agent's own generation loop, no network);
 * - fleet: the whole path, HTTP → scheduler → gRPC → agent, in a `kiln dev` child process, streamed over SSE;
 * - llama-bench: llama.cpp's own generation benchmark, at each thread count from 1 to the cores (its best is the baseline);
 * - llama-server: llama.cpp's own server with `-np 8`, streamed over SSE like the fleet.
 *
 * llama-bench and llama-server are built once (about 10 minutes on two cores) from the llama.cpp
 * release node-llama-cpp bundles, without Kiln's patch (`scripts/build-llama.ts --tools`).
 * Every side decodes greedily (temperature 0), so all generate the same tokens for a prompt: with
 * sampling, a random early end-of-turn makes one side's streams shorter and its TTFT weigh more.
 * For 1, 2, 4 and 8 concurrent streams it prints aggregate generated tokens/s, median time to first
 * token and the ratios. Targets: fleet ≥ 0.98× direct and < 2 ms added TTFT for one stream (issue 2);
 * fleet ≥ 0.9× llama-bench at its best thread count for one stream, and ≥ 1.0× llama-server over
 * 8 streams (issue 8).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { mkdtempSync } from "node:fs";
import { createInterface } from "node:readline";
import { createLogger } from "../core/log.js";
import { LlmEngine } from "../agent/llm/index.js";
import { defaultThreads, installedCpuBackend } from "../agent/llm/cpu-backend.js";
import { argValue, median } from "./lib/cli.js";
import { freePort } from "./lib/run.js";
import { buildTools } from "./build-llama.js";
import { ensureTestModel } from "./make-test-models.js";

const MODEL_ID = "famB-v3.1";
const CONTEXT = 2048;

interface Args { model?: string; benchModel: boolean; threads: number; tokens: number; rounds: number; reference: boolean; streams: number[] }

function parseArgs(argv: string[]): Args {
  const get = (flag: string) => argValue(argv, flag);
  const model = get("--model");
  return {
    ...(model ? { model: resolve(model) } : {}),
    benchModel: argv.includes("--bench-model"),
    threads: Number(get("--threads") ?? defaultThreads()),
    tokens: Number(get("--tokens") ?? 128),
    rounds: Number(get("--rounds") ?? 3),
    reference: !argv.includes("--no-reference"),
    streams: (get("--streams") ?? "1,2,4,8").split(",").map(Number),
  };
}

interface Sample { tokens: number; seconds: number; ttftMs: number[] }
type One = (prompt: number) => Promise<{ tokens: number; ttft: number }>;

const prompt = (i: number) => `Story number ${i}: once upon a time`;

/** Runs `rounds` rounds of c concurrent streams for each c in `concurrency`; stream s of round r gets prompt r·8+s. */
async function measure({ rounds, streams: concurrency }: Args, one: One): Promise<Map<number, Sample>> {
  await one(0); // warm-up
  const out = new Map<number, Sample>();
  for (const c of concurrency) {
    const sample: Sample = { tokens: 0, seconds: 0, ttftMs: [] };
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      const results = await Promise.all(Array.from({ length: c }, (_, s) => one(r * 8 + s)));
      sample.seconds += (performance.now() - t0) / 1000;
      for (const x of results) { sample.tokens += x.tokens; if (!Number.isNaN(x.ttft)) sample.ttftMs.push(x.ttft); }
    }
    out.set(c, sample);
  }
  return out;
}

async function benchDirect(modelPath: string, a: Args): Promise<Map<number, Sample>> {
  const engine = await LlmEngine.load({ models: [{ id: MODEL_ID, path: modelPath }], sequences: 8, contextSize: CONTEXT, threads: a.threads, gpu: "cpu", logger: createLogger("bench", "silent") });
  try {
    return await measure(a, async (i) => {
      const start = performance.now();
      let ttft = NaN;
      const r = await engine.generate(MODEL_ID, [{ role: "user", content: prompt(i) }], { maxTokens: a.tokens, temperature: 0, onText: () => { if (Number.isNaN(ttft)) ttft = performance.now() - start; } });
      return { tokens: r.completionTokens, ttft };
    });
  } finally {
    await engine.dispose();
  }
}

/** One streamed chat completion against an OpenAI-style server: completion tokens and time to first content. */
async function streamCompletion(base: string, key: string, model: string, text: string, maxTokens: number): Promise<{ tokens: number; ttft: number }> {
  const start = performance.now();
  const res = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: text }], max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`${base}: HTTP ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let ttft = NaN, buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    if (Number.isNaN(ttft) && /"content":"[^"]/.test(buffer)) ttft = performance.now() - start;
  }
  const usage = /"completion_tokens":(\d+)/.exec(buffer);
  return { tokens: usage ? Number(usage[1]) : 0, ttft };
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((ok) => {
    if (child.exitCode !== null) return ok();
    child.once("exit", () => ok());
    child.kill("SIGTERM");
  });
}

async function benchFleet(modelPath: string, a: Args): Promise<Map<number, Sample>> {
  const child = spawn(process.execPath, [resolve("bin/kiln.js"), "dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
    "--db", join(mkdtempSync(join(tmpdir(), "kiln-bench-")), "kiln.db"), "--serve", `${MODEL_ID}=${modelPath}`,
    "--sequences", "8", "--context-size", String(CONTEXT), "--threads", String(a.threads), "--gpu", "cpu", "--log-level", "warn"], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    let base = "", key = "";
    for await (const line of createInterface({ input: child.stdout! })) {
      if (line.includes("API base:")) base = line.split("API base:")[1]!.trim();
      if (line.includes("Dev key:")) { key = line.split("Dev key:")[1]!.trim(); break; }
    }
    return await measure(a, (i) => streamCompletion(base, key, MODEL_ID, prompt(i), a.tokens));
  } finally {
    await stop(child);
  }
}

/** llama-bench's generation speed (tg) at each thread count, tokens/s. */
function llamaBench(bin: string, modelPath: string, threads: number[], tokens: number): Map<number, number> {
  const res = spawnSync(bin, ["-m", modelPath, "-t", threads.join(","), "-p", "0", "-n", String(tokens), "-r", "3", "-o", "json"], { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
  if (res.status !== 0) throw new Error(`llama-bench failed: ${res.stderr}`);
  const rows = JSON.parse(res.stdout) as { n_threads: number; n_gen: number; avg_ts: number }[];
  return new Map(rows.filter((r) => r.n_gen > 0).map((r) => [r.n_threads, r.avg_ts]));
}

/** llama-server with 8 slots (context 2048 each), streamed like the fleet. */
async function benchLlamaServer(bin: string, modelPath: string, a: Args): Promise<Map<number, Sample>> {
  const port = await freePort();
  const child = spawn(bin, ["-m", modelPath, "-np", "8", "-c", String(8 * CONTEXT), "-t", String(a.threads), "--host", "127.0.0.1", "--port", String(port), "--no-webui"], { stdio: "ignore" });
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error(`llama-server exited (${child.exitCode})`);
      const ok = await fetch(`${base}/health`).then((r) => r.ok, () => false);
      if (ok) break;
      if (i > 600) throw new Error("llama-server did not become ready in 60 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    return await measure(a, (i) => streamCompletion(`${base}/v1`, "none", "model", prompt(i), a.tokens));
  } finally {
    await stop(child);
  }
}

const rate = (s: Sample) => s.tokens / s.seconds;

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const modelPath = a.model ?? (await ensureTestModel(a.benchModel ? "bench" : "tiny"));
  const backend = installedCpuBackend();
  console.log(`model ${modelPath}\nthreads ${a.threads} (${cpus().length} cores; CPU backend: ${backend ? "Kiln's shared-threadpool build" : "node-llama-cpp's prebuilt"}), ${a.tokens} tokens per stream, ${a.rounds} rounds per point, 8 sequences\n`);
  const tools = a.reference ? buildTools() : undefined;

  const direct = await benchDirect(modelPath, a);
  const fleet = await benchFleet(modelPath, a);
  const server = tools ? await benchLlamaServer(tools.server, modelPath, a) : undefined;
  const bench = tools ? llamaBench(tools.bench, modelPath, Array.from({ length: cpus().length }, (_, i) => i + 1), a.tokens) : undefined;

  console.table(a.streams.map((c) => {
    const d = direct.get(c)!, f = fleet.get(c)!, s = server?.get(c);
    return {
      streams: c,
      "direct tok/s": rate(d).toFixed(1),
      "fleet tok/s": rate(f).toFixed(1),
      "fleet ÷ direct": (rate(f) / rate(d)).toFixed(3),
      ...(s ? { "llama-server tok/s": rate(s).toFixed(1), "fleet ÷ llama-server": (rate(f) / rate(s)).toFixed(3) } : {}),
      "direct TTFT ms": median(d.ttftMs).toFixed(2),
      "fleet TTFT ms": median(f.ttftMs).toFixed(2),
      "added TTFT ms": (median(f.ttftMs) - median(d.ttftMs)).toFixed(2),
      ...(s ? { "llama-server TTFT ms": median(s.ttftMs).toFixed(2) } : {}),
    };
  }));

  const f1 = rate(fleet.get(1)!), d1 = rate(direct.get(1)!);
  console.log(`\n1 stream: fleet ÷ direct = ${(f1 / d1).toFixed(3)} (target ≥ 0.98); added median TTFT = ${(median(fleet.get(1)!.ttftMs) - median(direct.get(1)!.ttftMs)).toFixed(2)} ms (target < 2 ms)`);
  if (bench && server && fleet.has(8)) {
    console.log(`llama-bench tg${a.tokens}: ${[...bench].map(([t, r]) => `${t} thread${t > 1 ? "s" : ""} ${r.toFixed(1)} tok/s`).join(", ")}`);
    const [bestThreads, best] = [...bench].reduce((x, y) => (y[1] > x[1] ? y : x));
    console.log(`1 stream: fleet ÷ llama-bench (best, ${bestThreads} thread${bestThreads > 1 ? "s" : ""}) = ${(f1 / best).toFixed(3)} (target ≥ 0.9)`);
    console.log(`8 streams: fleet ÷ llama-server -np 8 = ${(rate(fleet.get(8)!) / rate(server.get(8)!)).toFixed(3)} (target ≥ 1.0)`);
  }
}

main().then(() => process.exit(0), (err: unknown) => { console.error(err); process.exit(1); });

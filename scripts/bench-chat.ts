/**
 * Chat benchmark, every side measured in one run on the same GGUF file and machine:
 *
 *   npm run bench:chat -- [--model PATH | --bench-model] [--threads N] [--tokens N] [--rounds N] [--streams 1,2,4,8] [--ttft-samples N] [--no-reference] [--stream-intervals 10,100]
 *   npm run bench:chat -- --gpu [--model PATH] [--streams 1,8,32] …   (on a CUDA machine with nvcc)
 *   npm run bench:chat -- --turns N [--conversations 4] [--model PATH | --bench-model]   (multi-turn conversations: lib/turns.ts)
 *   npm run bench:chat -- --speculative [--model PATH | --bench-model] [--draft-never PATH] [--tokens N] [--rounds N]   (speculative decoding: lib/speculative.ts)
 *
 * With `--gpu` every side runs on CUDA (node-llama-cpp's CUDA binaries with Kiln's addon; llama.cpp's
 * tools built with CUDA from the same release, `-ngl 99`), the servers get as many slots as the
 * largest stream count, and without `--model` the model is Llama-3.2-1B's shape with Llama 3's
 * real tokenizer (random weights, `make-test-models --realistic`), quantized to Q4_K_M with
 * llama-quantize. Targets there (issue 19): one stream ≥ 0.95× llama-server's generation speed,
 * 8 and 32 streams ≥ 1.2× llama-server.
 *
 * - direct: Kiln's LLM engine in this process (node-llama-cpp, the agent's own generation loop, no network);
 * - fleet: the whole path, HTTP → scheduler → gRPC → agent, in a `kiln dev` child process, streamed over SSE
 *   (with `--stream-intervals`, one more `kiln dev` per listed `--stream-interval`, compared with the default);
 * - llama-bench: llama.cpp's own generation benchmark, at each thread count from 1 to the cores (its best is the baseline);
 * - llama-server: llama.cpp's own server with `-np 8`, streamed over SSE like the fleet.
 *
 * llama-bench and llama-server are built once (about 10 minutes on two cores) from the llama.cpp
 * release node-llama-cpp bundles, without Kiln's patch (`scripts/build-llama.ts --tools`).
 * Every side decodes greedily (temperature 0), so all generate the same tokens for a prompt: with
 * sampling, a random early end-of-turn makes one side's streams shorter and its TTFT weigh more.
 * All sides are started first and then measured in turn, round by round (a round of each side for
 * each stream count, then the next round, the order of the sides rotating), so that a slow minute of
 * a shared machine weighs on every side alike instead of on whichever ran then.
 * For 1, 2, 4 and 8 concurrent streams it prints aggregate generated tokens/s, median time to first
 * token and the ratios, and for the target ratios also their spread over the rounds. Targets: fleet ≥ 0.98× direct and < 2 ms added TTFT for one stream (issue 2);
 * fleet ≥ 0.9× llama-bench at its best thread count for one stream, and ≥ 1.0× llama-server over
 * 8 streams (issue 8).
 *
 * Two measurements serve the one-stream targets only:
 * - added time to first token: `--ttft-samples` short requests a round, direct, fleet and the relay
 *   floor taking turns request by request (one sample a round from the 128-token runs was all noise).
 *   The relay floor (`lib/relay-floor.ts`, benchmark-only) is the fleet's topology with none of
 *   Kiln's code: a bare HTTP server relaying over Kiln's proto to an echo agent, which on the CPU
 *   first reads as much memory as the model's weights, as the prompt's evaluation does, and whose
 *   time for that is taken out. Its time to first token is what the four trips between processes
 *   cost here, a lower bound for the added time;
 * - generation speed, the quantity llama-bench's `tg` reports: tokens after the first ÷ the time
 *   from the first to the end of the stream. The end-to-end tokens/s also counts the prompt's
 *   evaluation and the request's trip, which llama-bench leaves out.
 * The HTTP client is `node:http` with keep-alive, for the fleet and llama-server alike: on two
 * vCPUs `fetch` (undici) spends about 2 ms of CPU per request beside the server under test,
 * which lands in the server's time to first token.
 */
import { execFile, spawn } from "node:child_process";
import { Agent, request } from "node:http";
import { promisify } from "node:util";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { existsSync, mkdirSync, mkdtempSync, statSync } from "node:fs";
import { createInterface } from "node:readline";
import { createLogger } from "../core/log.js";
import { LlmEngine } from "../agent/llm/index.js";
import { loadedBinaries } from "../agent/llm/binaries.js";
import { defaultThreads, installedCpuBackend } from "../core/cpu.js";
import { installedAddon } from "../core/prebuilt.js";
import { argValue, median, quantile, spread } from "./lib/cli.js";
import { cpuSeconds, freePort, stopped } from "./lib/run.js";
import { buildTools, offloadFlags, vocabGguf } from "./build-llama.js";
import { defaultModelDir, REALISTIC_LLAMA, writeWithVocabulary } from "../fabricate/index.js";
import { ensureTestModel } from "../fabricate/index.js";
import { evaluationMs, startRelayFloor } from "./lib/relay-floor.js";
import { benchTurns } from "./lib/turns.js";
import { benchSpeculative } from "./lib/speculative.js";

const MODEL_ID = "famB-v3.1";
const CONTEXT = 2048;

interface Args {
  model?: string;
  benchModel: boolean;
  gpu: boolean;
  threads: number;
  tokens: number;
  rounds: number;
  reference: boolean;
  streams: number[];
  intervals: number[];
  ttftSamples: number;
  /** `--turns N`: the multi-turn benchmark instead (lib/turns.ts); 0: not. */
  turns: number;
  /** `--conversations N` with `--turns`: conversations interleaved. Default 4. */
  conversations: number;
}

function parseArgs(argv: string[]): Args {
  const get = (flag: string) => argValue(argv, flag);
  const model = get("--model");
  return {
    ...(model ? { model: resolve(model) } : {}),
    benchModel: argv.includes("--bench-model"),
    gpu: argv.includes("--gpu"),
    threads: Number(get("--threads") ?? defaultThreads()),
    tokens: Number(get("--tokens") ?? 128),
    rounds: Number(get("--rounds") ?? 5),
    reference: !argv.includes("--no-reference"),
    streams: (get("--streams") ?? (argv.includes("--gpu") ? "1,8,32" : "1,2,4,8")).split(",").map(Number),
    intervals: get("--stream-intervals")?.split(",").map(Number) ?? [],
    ttftSamples: Number(get("--ttft-samples") ?? 10),
    turns: Number(get("--turns") ?? 0),
    conversations: Number(get("--conversations") ?? 4),
  };
}

/** c concurrent streams' results: generated tokens, wall time, each stream's TTFT and generation speed (tokens/s after its first). */
interface Sample {
  tokens: number;
  seconds: number;
  ttftMs: number[];
  genRates: number[];
}
/** One streamed completion of prompt `i` (at most `maxTokens`): tokens, ms to the first text, ms from there to the end. */
type One = (prompt: number, maxTokens: number) => Promise<Stream>;
interface Stream {
  tokens: number;
  ttft: number;
  rest: number;
}

/** A side under measurement: one streamed completion at a time, and how to shut it down. */
interface Side {
  one: One;
  close: () => Promise<void>;
  /** The child process whose main thread (event loop) serves it; absent for direct, which runs in this one. */
  pid?: number;
}

const prompt = (i: number) => `Story number ${i}: once upon a time`;

/**
 * One round of c concurrent streams; stream s of round r gets prompt r·8+s. Below 4 streams the
 * round runs 4/c times over, so that every point measures about as many tokens (a single
 * 128-token stream was too short a sample on a machine whose speed drifts).
 */
async function round(one: One, c: number, r: number, maxTokens: number): Promise<Sample> {
  const results: Stream[] = [];
  const t0 = performance.now();
  for (let k = 0; k < Math.max(1, Math.round(4 / c)); k++) results.push(...(await Promise.all(Array.from({ length: c }, (_, s) => one(r * 8 + s + k * 100, maxTokens)))));
  const seconds = (performance.now() - t0) / 1000;
  const timed = results.filter((x) => !Number.isNaN(x.ttft));
  return {
    tokens: results.reduce((n, x) => n + x.tokens, 0),
    seconds,
    ttftMs: timed.map((x) => x.ttft),
    genRates: timed.filter((x) => x.tokens > 1 && x.rest > 0).map((x) => (x.tokens - 1) / (x.rest / 1000)),
  };
}

async function startDirect(modelPath: string, a: Args): Promise<Side> {
  const engine = await LlmEngine.load({
    models: [{ id: MODEL_ID, path: modelPath }],
    sequences: slots(a),
    contextSize: CONTEXT,
    threads: a.threads,
    gpu: a.gpu ? "cuda" : "cpu",
    logger: createLogger("bench", "silent"),
  });
  return {
    one: async (i, maxTokens) => {
      const start = performance.now();
      let ttft = NaN;
      const r = await engine.generate(MODEL_ID, [{ role: "user", content: prompt(i) }], {
        maxTokens,
        temperature: 0,
        onText: () => {
          if (Number.isNaN(ttft)) ttft = performance.now() - start;
        },
      });
      return { tokens: r.completionTokens, ttft, rest: performance.now() - start - ttft };
    },
    close: () => engine.dispose(),
  };
}

/**
 * Streamed chat completions against an OpenAI-style server at `base` (…/v1), over one keep-alive pool.
 * `ownMs(text)`: the server's own time in a stream, taken out of its time to first token (the relay floor's evaluation).
 */
function sseClient(base: string, key: string, model: string, ownMs?: (text: string) => number): One {
  const url = new URL(`${base}/chat/completions`);
  const agent = new Agent({ keepAlive: true });
  const attempt = (i: number, maxTokens: number, retry: boolean): Promise<Stream> =>
    new Promise<Stream>((resolve, reject) => {
      const body = JSON.stringify({
        model,
        messages: [{ role: "user", content: prompt(i) }],
        max_tokens: maxTokens,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      });
      const fail = (err: Error) => reject(new Error(`${base}: ${err.message}`, { cause: err }));
      const start = performance.now();
      const req = request(
        url,
        { method: "POST", agent, headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
        (res) => {
          let ttft = NaN,
            text = "";
          res.setEncoding("utf8");
          res.on("data", (piece: string) => {
            text += piece;
            if (Number.isNaN(ttft) && /"content":"[^"]/.test(text)) ttft = performance.now() - start;
          });
          res.on("error", fail);
          res.on("end", () => {
            if (res.statusCode !== 200) return fail(new Error(`HTTP ${res.statusCode} ${text}`));
            const usage = /"completion_tokens":(\d+)/.exec(text);
            const own = ownMs?.(text) ?? 0;
            resolve({ tokens: usage ? Number(usage[1]) : 0, ttft: ttft - own, rest: performance.now() - start - ttft });
          });
        },
      );
      req.on("error", (err: NodeJS.ErrnoException) => {
        // An idle keep-alive socket the server closed just as it was reused (the rounds pause while
        // llama-bench runs, longer than the servers' 5 s keep-alive): Node's documented case for one retry.
        if (retry && req.reusedSocket && err.code === "ECONNRESET") attempt(i, maxTokens, false).then(resolve, reject);
        else fail(err);
      });
      req.end(body);
    });
  return (i, maxTokens) => attempt(i, maxTokens, true);
}

/** `kiln dev` serving the model; `streamInterval` overrides its `--stream-interval` default. */
async function startFleet(modelPath: string, a: Args, streamInterval?: number): Promise<Side> {
  const child = spawn(
    process.execPath,
    [
      resolve("bin/kiln.js"),
      "dev",
      "--http",
      "127.0.0.1:0",
      "--grpc",
      "127.0.0.1:0",
      "--port",
      "0",
      "--db",
      join(mkdtempSync(join(tmpdir(), "kiln-bench-")), "kiln.db"),
      "--serve",
      `${MODEL_ID}=${modelPath}`,
      "--sequences",
      String(slots(a)),
      "--context-size",
      String(CONTEXT),
      "--threads",
      String(a.threads),
      "--gpu",
      a.gpu ? "cuda" : "cpu",
      "--log-level",
      "warn",
      ...(streamInterval !== undefined ? ["--stream-interval", String(streamInterval)] : []),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let base = "",
    key = "";
  for await (const line of createInterface({ input: child.stdout! })) {
    if (line.includes("API base:")) base = line.split("API base:")[1]!.trim();
    if (line.includes("Dev key:")) {
      key = line.split("Dev key:")[1]!.trim();
      break;
    }
  }
  if (!key) {
    await stopped(child);
    throw new Error("kiln dev exited before printing its dev key");
  }
  return { one: sseClient(base, key, MODEL_ID), close: () => stopped(child), ...(child.pid ? { pid: child.pid } : {}) };
}

/**
 * llama-bench's generation speed (tg, one repetition after its warm-up) at each thread count,
 * tokens/s. Asynchronous: a blocked event loop would keep idle keep-alive sockets in the client pool
 * past the servers' own timeouts, and the next request would find them closed.
 */
async function llamaBench(bin: string, modelPath: string, threads: number[], tokens: number, gpu: boolean): Promise<Map<number, number>> {
  const res = await promisify(execFile)(bin, ["-m", modelPath, "-t", threads.join(","), "-p", "0", "-n", String(tokens), "-r", "1", "-o", "json", ...offloadFlags(gpu)], {
    encoding: "utf8",
    maxBuffer: 16 * 1024 * 1024,
  }).catch((err: Error & { stderr?: string }) => {
    throw new Error(`llama-bench failed: ${err.stderr ?? err.message}`);
  });
  const rows = JSON.parse(res.stdout) as { n_threads: number; n_gen: number; avg_ts: number }[];
  return new Map(rows.filter((r) => r.n_gen > 0).map((r) => [r.n_threads, r.avg_ts]));
}

/** llama-server with as many slots as the fleet (context 2048 each), streamed like the fleet. */
async function startLlamaServer(bin: string, modelPath: string, a: Args): Promise<Side> {
  const port = await freePort();
  const child = spawn(
    bin,
    [
      "-m",
      modelPath,
      "-np",
      String(slots(a)),
      "-c",
      String(slots(a) * CONTEXT),
      "-t",
      String(a.threads),
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--no-webui",
      ...offloadFlags(a.gpu),
    ],
    { stdio: "ignore" },
  );
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`llama-server exited (${child.exitCode})`);
    const ok = await fetch(`${base}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (i > 600) {
      await stopped(child);
      throw new Error("llama-server did not become ready in 60 s");
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { one: sseClient(`${base}/v1`, "none", "model"), close: () => stopped(child) };
}

const rate = (s: Sample) => s.tokens / s.seconds;
const add = (x: Sample, y: Sample): Sample => ({
  tokens: x.tokens + y.tokens,
  seconds: x.seconds + y.seconds,
  ttftMs: [...x.ttftMs, ...y.ttftMs],
  genRates: [...x.genRates, ...y.genRates],
});
const mean = (xs: number[]) => xs.reduce((n, x) => n + x, 0) / xs.length;

/** Slots of every server side: 8 on CPU; on a GPU, the largest stream count (at least 8). */
const slots = (a: Args): number => (a.gpu ? Math.max(8, ...a.streams) : 8);

/** The GPU benchmark's model: Llama-3.2-1B's shape with Llama 3's tokenizer, Q4_K_M (written once under .kiln/test-models). */
async function realisticModel(quantize: string): Promise<string> {
  const dir = defaultModelDir();
  const q4 = join(dir, REALISTIC_LLAMA.file.replace("-f16.gguf", "-q4_k_m.gguf"));
  if (existsSync(q4)) return q4;
  const f16 = join(dir, REALISTIC_LLAMA.file);
  if (!existsSync(f16)) {
    mkdirSync(dir, { recursive: true });
    console.log(`fabricating ${f16} (Llama-3.2-1B shape, Llama 3's tokenizer, random weights)…`);
    await writeWithVocabulary(f16, vocabGguf("llama-bpe"));
  }
  await promisify(execFile)(quantize, [f16, q4, "Q4_K_M", String(cpus().length)], { maxBuffer: 64 * 1024 * 1024 });
  return q4;
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  if (process.argv.includes("--speculative")) {
    // one stream with and without speculative decoding, in Kiln's engine (lib/speculative.ts)
    const modelPath = a.model ?? (await ensureTestModel(a.benchModel ? "bench" : "tiny"));
    const neverPath = resolve(argValue(process.argv, "--draft-never") ?? (await ensureTestModel("tiny")));
    console.log(`model ${modelPath}; CPU, ${a.threads} threads (${cpus().length} cores); a draft that disagrees: ${neverPath}\n`);
    return benchSpeculative({ modelPath, neverPath, tokens: a.tokens, rounds: a.rounds, threads: a.threads });
  }
  if (a.turns) {
    // conversations with a growing history through a fleet of two agents (lib/turns.ts)
    const modelPath = a.model ?? (await ensureTestModel(a.benchModel ? "bench" : "tiny"));
    console.log(`model ${modelPath}; CPU, one thread per agent (${cpus().length} cores)\n`);
    return benchTurns({ modelPath, turns: a.turns, conversations: a.conversations, replyTokens: 32, lastPromptTokens: 1900 });
  }
  const tools = a.reference || a.gpu ? buildTools({ cuda: a.gpu }) : undefined;
  const modelPath = a.model ?? (a.gpu ? await realisticModel(tools!.quantize) : await ensureTestModel(a.benchModel ? "bench" : "tiny"));
  const backend = installedCpuBackend();
  console.log(
    `model ${modelPath}\n${a.gpu ? "CUDA (-ngl 99 for llama.cpp's tools)" : "CPU"}; threads ${a.threads} (${cpus().length} cores; CPU backend: ${backend ? "Kiln's shared-threadpool build" : "node-llama-cpp's prebuilt"}; addon: ${installedAddon(a.gpu ? "cuda" : "cpu") ? "Kiln's build, sampling in the decode worker" : "node-llama-cpp's prebuilt"}), ${a.tokens} tokens per stream, ${a.rounds} rounds per point, ${slots(a)} sequences, sides interleaved round by round\n`,
  );

  const sides = new Map<string, Side>();
  let floor: Side | undefined;
  try {
    sides.set("direct", await startDirect(modelPath, a));
    // What node-llama-cpp really loaded in this process (its memory map), not what the install stamped.
    const loaded = loadedBinaries();
    console.log(
      `loaded: addon ${loaded.addon ?? "none"} (${loaded.kilnAddon ? "Kiln's build, sampling in the decode worker" : "node-llama-cpp's own"}; folder ${loaded.folder ?? "?"}), ggml backends ${loaded.backends.join(", ") || "none"}\n`,
    );
    sides.set("fleet", await startFleet(modelPath, a));
    for (const ms of a.intervals) sides.set(`fleet ${ms} ms`, await startFleet(modelPath, a, ms));
    if (tools) sides.set("llama-server", await startLlamaServer(tools.server, modelPath, a));
    // on the CPU the echo reads as much memory as the model's weights before it answers, as the prompt's evaluation does
    const relayFloor = await startRelayFloor(a.gpu ? {} : { evaluation: { bytes: statSync(modelPath).size, threads: a.threads } });
    floor = { one: sseClient(relayFloor.base, "none", MODEL_ID, evaluationMs), close: relayFloor.close };
    for (const side of [...sides.values(), floor]) await side.one(0, a.tokens); // warm-up

    // samples.get(side).get(streams)[round]
    const samples = new Map([...sides.keys()].map((name) => [name, new Map(a.streams.map((c) => [c, [] as Sample[]]))]));
    const benchRounds: Map<number, number>[] = [];
    /** Time to first token of short requests, the sides taking turns: [direct, fleet, relay floor] per triple. */
    const ttftTriples: [number, number, number][] = [];
    const ttftSides = [sides.get("direct")!, sides.get("fleet")!, floor];
    const names = [...sides.keys()];
    /** One stream's event-loop CPU (s) and tokens, per side: its server's main thread, and this process's (the client; direct's own loop). */
    const loops = new Map(names.map((name) => [name, { server: 0, client: 0, tokens: 0 }]));
    for (let r = 0; r < a.rounds; r++) {
      for (const c of a.streams) {
        for (let k = 0; k < names.length; k++) {
          const name = names[(r + k) % names.length]!;
          const side = sides.get(name)!;
          // the event loops' CPU (s): the side's server's main thread, and this process's (the client; direct's own loop)
          const loopCpu = () => [cpuSeconds(side.pid, true) ?? NaN, cpuSeconds(process.pid, true) ?? NaN] as const;
          const before = loopCpu();
          const sample = await round(side.one, c, r, a.tokens);
          samples.get(name)!.get(c)!.push(sample);
          if (c === 1) {
            const [server, client] = loopCpu();
            const loop = loops.get(name)!;
            loop.server += server - before[0];
            loop.client += client - before[1];
            loop.tokens += sample.tokens;
          }
        }
      }
      for (let k = 0; k < a.ttftSamples; k++) {
        const triple = [NaN, NaN, NaN] as [number, number, number];
        for (let j = 0; j < 3; j++) {
          const side = (j + k) % 3;
          triple[side] = (await ttftSides[side]!.one(100 + r * a.ttftSamples + k, 4)).ttft;
        }
        ttftTriples.push(triple);
      }
      if (tools) benchRounds.push(await llamaBench(tools.bench, modelPath, a.gpu ? [a.threads] : Array.from({ length: cpus().length }, (_, i) => i + 1), a.tokens, a.gpu));
      process.stderr.write(`round ${r + 1}/${a.rounds} done\n`);
    }

    /** A side's samples at c streams, one per round. */
    const of = (name: string, c: number) => samples.get(name)!.get(c)!;
    const total = (name: string, c: number) => of(name, c).reduce(add, { tokens: 0, seconds: 0, ttftMs: [], genRates: [] });
    /** Per-round ratios of two sides' tokens/s at c streams. */
    const ratios = (x: string, y: string, c: number) => of(x, c).map((s, r) => rate(s) / rate(of(y, c)[r]!));
    const server = sides.has("llama-server");
    console.table(
      a.streams.map((c) => {
        const d = total("direct", c),
          f = total("fleet", c),
          s = server ? total("llama-server", c) : undefined;
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
      }),
    );

    if (a.streams.includes(1)) {
      const f1 = total("fleet", 1),
        d1 = total("direct", 1);
      console.log(`\n1 stream: fleet ÷ direct = ${(rate(f1) / rate(d1)).toFixed(3)} (target ≥ 0.98; ${spread(ratios("fleet", "direct", 1))})`);
      if (ttftTriples.length) {
        const direct = ttftTriples.map((p) => p[0]),
          fleet = ttftTriples.map((p) => p[1]),
          relay = ttftTriples.map((p) => p[2]);
        const added = median(fleet) - median(direct);
        console.log(
          `1 stream: added median TTFT = ${added.toFixed(2)} ms (target < 2 ms; fleet ${median(fleet).toFixed(2)} ms, direct ${median(direct).toFixed(2)} ms over ${ttftTriples.length} short requests each, taking turns; median of the triples' differences ${median(ttftTriples.map((p) => p[1] - p[0])).toFixed(2)} ms)`,
        );
        console.log(
          `1 stream: relay floor TTFT = ${median(relay).toFixed(2)} ms (the four trips between processes with no Kiln code${a.gpu ? "" : ", after the echo's evaluation, its time taken out"}; p25 ${quantile(relay, 0.25).toFixed(2)}, p75 ${quantile(relay, 0.75).toFixed(2)}); Kiln's own share of the added TTFT = ${(added - median(relay)).toFixed(2)} ms`,
        );
      }
      const perToken = (seconds: number, tokens: number) => ((seconds * 1e6) / tokens).toFixed(0);
      const [direct, fleet] = [loops.get("direct")!, loops.get("fleet")!];
      if (!Number.isNaN(direct.client) && fleet.tokens > 0)
        console.log(
          `1 stream, event loops' CPU a token (main threads, from /proc, 10 ms ticks): direct ${perToken(direct.client, direct.tokens)} µs; fleet: kiln dev ${perToken(fleet.server, fleet.tokens)} µs, the client ${perToken(fleet.client, fleet.tokens)} µs (on a CPU node each takes a core from the compute threads)`,
        );
      const gen = (name: string) => of(name, 1).map((s) => mean(s.genRates));
      console.log(
        `1 stream, generation speed (tokens after the first ÷ time after the first, mean of rounds): direct ${mean(gen("direct")).toFixed(1)}, fleet ${mean(gen("fleet")).toFixed(1)} tok/s${server ? `, llama-server ${mean(gen("llama-server")).toFixed(1)} (fleet ÷ llama-server ${(mean(gen("fleet")) / mean(gen("llama-server"))).toFixed(3)}: both sample and detokenize every token, which llama-bench does not)` : ""}`,
      );
      if (benchRounds.length) {
        const threads = [...benchRounds[0]!.keys()];
        const benchMean = (t: number) => mean(benchRounds.map((m) => m.get(t)!));
        const best = threads.reduce((x, y) => (benchMean(y) > benchMean(x) ? y : x));
        console.log(
          `llama-bench tg${a.tokens}: ${threads.map((t) => `${t} thread${t > 1 ? "s" : ""} ${benchMean(t).toFixed(1)} tok/s`).join(", ")} (mean of ${benchRounds.length} runs, one per round)`,
        );
        const perRound = gen("fleet").map((g, r) => g / benchRounds[r]!.get(best)!);
        console.log(
          `1 stream: fleet generation speed ÷ llama-bench (best, ${best} thread${best > 1 ? "s" : ""}) = ${(mean(gen("fleet")) / benchMean(best)).toFixed(3)} (target ≥ 0.9; ${spread(perRound)}); end to end, with the prompt and the trip: ${(rate(f1) / benchMean(best)).toFixed(3)}`,
        );
      }
    }
    if (server) {
      for (const c of a.streams.filter((n) => n === 8 || (a.gpu && n === 32))) {
        console.log(
          `${c} streams: fleet ÷ llama-server -np ${slots(a)} = ${(rate(total("fleet", c)) / rate(total("llama-server", c))).toFixed(3)} (target ≥ ${a.gpu ? "1.2" : "1.0"}; ${spread(ratios("fleet", "llama-server", c))})`,
        );
      }
      if (a.gpu && a.streams.includes(1)) {
        const gen = (name: string) => of(name, 1).map((s) => mean(s.genRates));
        console.log(`1 stream on the GPU: fleet generation speed ÷ llama-server's = ${(mean(gen("fleet")) / mean(gen("llama-server"))).toFixed(3)} (target ≥ 0.95)`);
      }
    }
    if (a.intervals.length) {
      console.log("\nThe fleet at other --stream-interval values (the same rounds):");
      console.table(
        a.streams.map((c) =>
          Object.fromEntries([
            ["streams", c],
            ["fleet tok/s", rate(total("fleet", c)).toFixed(1)],
            ...a.intervals.flatMap((ms) => [
              [`${ms} ms tok/s`, rate(total(`fleet ${ms} ms`, c)).toFixed(1)],
              [`${ms} ms ÷ fleet (median of rounds)`, median(ratios(`fleet ${ms} ms`, "fleet", c)).toFixed(3)],
            ]),
          ]),
        ),
      );
    }
  } finally {
    for (const side of [...sides.values(), ...(floor ? [floor] : [])]) await side.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);

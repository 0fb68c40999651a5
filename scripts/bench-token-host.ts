/**
 * One stream's per-token host work: the time between two decodes that is not the decode, in Kiln's
 * engine, against llama.cpp's own tools, every side in one run on the same GGUF file and machine.
 *
 *   npm run bench:token-host -- --model stories260K.gguf [--threads N] [--tokens 200] [--rounds 5] [--requests 3] [--streams 4,8] [--no-reference]
 *   npm run bench:token-host -- --wide-vocab --streams 32 --no-reference [--temperature 0.8]
 *   npm run bench:token-host -- --gpu --model FILE --threads 8 --streams 32   (on a CUDA machine: scripts/gpu/device.sh host)
 *
 * A model whose decode takes well under a millisecond (stories260K: 5 layers, 64 wide) makes the host
 * work most of a token's time, as a GPU's fast decode does. The sides:
 *
 * - native loop: Kiln's engine (`LlmEngine`, as bench-chat's direct side, 8 slots) with a lone sequence
 *   generating in the addon's native loop (`generateTokens`, patches/npm): decode and sample on one
 *   worker thread, the tokens handed to JavaScript as they come;
 * - batch path: the same engine and requests with that loop turned off (`_kilnNativeGeneration`):
 *   node-llama-cpp's batch dispatch for every token, a thread-pool round trip and its JavaScript
 *   between two decodes;
 * - llama-bench: `tg` with the same threads (decode only: no sampling, no detokenizing), one run a round;
 * - llama-server: one slot, the raw `/completion` endpoint streamed, as the engine's raw prompts here.
 *
 * Generation speed, as llama-bench's `tg` reports it: tokens after the first ÷ time from the first to
 * the last (the prompt and the request's trip left out). Each round runs `--requests` greedy requests
 * of `--tokens` tokens on each side, in rotating order; the ratios are computed round by round (the
 * machine's speed drifts) and printed with their median and range. The batch path's time is split
 * with marks on the binding: the decode call (the worker's decode and sampling, and the two thread
 * hand-offs) and the JavaScript from its result to the next decode call. The native loop's and the
 * batch path's texts are compared: they must be the same. With `--streams`, that many streams at once
 * too, the loop allowed and not (it runs only once a single stream is left), and the batch's tokens
 * sampled on one thread instead of the context's threads (the decode's worker samples a batch's
 * tokens on up to that many at once, patches/npm): aggregate tokens/s.
 *
 * `--wide-vocab` runs the fabricated tiny model with Llama 3's vocabulary size (128,256 tokens): its
 * decode is cheap and sampling a token reads 128 k logits, as on a GPU with a real model, where with
 * many streams the sampling on the host takes as long as the decode of the batch. `--gpu` runs every side
 * on CUDA (`-ngl 99` for llama.cpp's tools, built with CUDA as bench-chat's `--gpu` builds them).
 */
import { execFile, spawn } from "node:child_process";
import { request } from "node:http";
import { cpus } from "node:os";
import { resolve } from "node:path";
import { promisify } from "node:util";
import type { LlamaContext } from "node-llama-cpp";
import { createLogger } from "../core/log.js";
import { defaultThreads } from "../core/cpu.js";
import { LlmEngine } from "../agent/llm/index.js";
import { loadedBinaries } from "../agent/llm/binaries.js";
import { ensureTestModel } from "../fabricate/index.js";
import { buildTools, offloadFlags } from "./build-llama.js";
import { argValue, median, spread } from "./lib/cli.js";
import { freePort, stopped } from "./lib/run.js";

const MODEL_ID = "m";
const CONTEXT = 2048;
/** Sequences of the engine's context: 8, or the most `--streams` when more. */
const MIN_SLOTS = 8;

interface Args {
  model?: string;
  /** The fabricated tiny model with Llama 3's vocabulary size, when no `model`. */
  wideVocab: boolean;
  /** Every side on CUDA. */
  gpu: boolean;
  /** Sampling temperature (0: greedy); above 0 each request samples with its index as its seed, so sides still compare their texts. */
  temperature: number;
  threads: number;
  tokens: number;
  rounds: number;
  requests: number;
  reference: boolean;
  /** Concurrent streams to compare the native loop on and off at too (aggregate tokens/s): it runs only while one stream is left. */
  streams: number[];
}

function parseArgs(argv: string[]): Args {
  const model = argValue(argv, "--model");
  return {
    ...(model ? { model: resolve(model) } : {}),
    wideVocab: argv.includes("--wide-vocab"),
    gpu: argv.includes("--gpu"),
    temperature: Number(argValue(argv, "--temperature") ?? 0),
    threads: Number(argValue(argv, "--threads") ?? defaultThreads()),
    tokens: Number(argValue(argv, "--tokens") ?? 200),
    rounds: Number(argValue(argv, "--rounds") ?? 5),
    requests: Number(argValue(argv, "--requests") ?? 3),
    reference: !argv.includes("--no-reference"),
    streams: (argValue(argv, "--streams") ?? "")
      .split(",")
      .filter(Boolean)
      .map(Number)
      .filter((c) => c > 1),
  };
}

const prompt = (i: number) => `Once upon a time, in story number ${i},`;

/** One streamed generation: tokens, and ms from the first token to the last. */
interface Stream {
  tokens: number;
  rest: number;
  text: string;
}

/** Per-token marks on the context's binding: each decode call's time to its result, and the time from a result to the next call. */
class Marks {
  readonly decode: number[] = [];
  readonly between: number[] = [];
  private lastEnd = NaN;
  on = false;

  constructor(context: LlamaContext) {
    const native = (context as unknown as { _ctx: Record<string, (...args: unknown[]) => unknown> })._ctx;
    const decodeBatch = native.decodeBatch!;
    // read-only on the prototype: shadowed on the instance (as test/helpers/binding.ts does)
    Object.defineProperty(native, "decodeBatch", {
      configurable: true,
      value: (...args: unknown[]) => {
        const start = performance.now();
        if (this.on && !Number.isNaN(this.lastEnd)) this.between.push(start - this.lastEnd);
        return (decodeBatch.apply(native, args) as Promise<unknown>).then((result) => {
          const end = performance.now();
          if (this.on) this.decode.push(end - start);
          this.lastEnd = end;
          return result;
        });
      },
    });
  }

  /** Marks from the next decode on (the first token's, the prompt's, left out). */
  start(): void {
    this.on = true;
    this.lastEnd = NaN;
  }
  stop(): void {
    this.on = false;
  }
}

async function startEngine(modelPath: string, a: Args) {
  const engine = await LlmEngine.load({
    models: [{ id: MODEL_ID, path: modelPath }],
    sequences: Math.max(MIN_SLOTS, ...a.streams),
    contextSize: CONTEXT,
    threads: a.threads,
    gpu: a.gpu ? "cuda" : "cpu",
    logger: createLogger("bench", "silent"),
  });
  const context = engine.modelPools[0]!.context;
  const marks = new Marks(context);
  /** `samplingThreads`: the most threads a batch's tokens are sampled on (0: the context's threads). */
  const one = async (i: number, native: boolean, samplingThreads = 0): Promise<Stream> => {
    Object.assign(context, { _kilnNativeGeneration: native, _kilnSamplingThreads: samplingThreads });
    const start = performance.now();
    let first = NaN;
    const r = await engine.generate(
      MODEL_ID,
      { prompt: prompt(i) },
      {
        maxTokens: a.tokens,
        temperature: a.temperature,
        ...(a.temperature > 0 ? { sampling: { seed: i } } : {}),
        onText: () => {
          if (!Number.isNaN(first)) return;
          first = performance.now();
          if (!native) marks.start();
        },
      },
    );
    marks.stop();
    return { tokens: r.completionTokens, rest: performance.now() - (Number.isNaN(first) ? start : first), text: r.text };
  };
  return { one, marks, close: () => engine.dispose() };
}

/** llama-bench's tg at `threads`, tokens/s. */
async function llamaBench(bin: string, modelPath: string, a: Args): Promise<number> {
  const res = await promisify(execFile)(bin, ["-m", modelPath, "-t", String(a.threads), "-p", "0", "-n", String(a.tokens), "-r", "1", "-o", "json", ...offloadFlags(a.gpu)], {
    encoding: "utf8",
  });
  const rows = JSON.parse(res.stdout) as { n_gen: number; avg_ts: number }[];
  return rows.find((r) => r.n_gen > 0)!.avg_ts;
}

/** llama-server with one slot, streamed on its raw `/completion` endpoint. */
async function startLlamaServer(bin: string, modelPath: string, a: Args) {
  const port = await freePort();
  const child = spawn(
    bin,
    ["-m", modelPath, "-np", "1", "-c", String(CONTEXT), "-t", String(a.threads), "--host", "127.0.0.1", "--port", String(port), "--no-webui", ...offloadFlags(a.gpu)],
    {
      stdio: "ignore",
    },
  );
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`llama-server exited (${child.exitCode})`);
    if (
      await fetch(`${base}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (i > 600) {
      await stopped(child);
      throw new Error("llama-server did not become ready in 60 s");
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const one = (i: number): Promise<Stream> =>
    new Promise((ok, fail) => {
      const body = JSON.stringify({
        prompt: prompt(i),
        n_predict: a.tokens,
        temperature: a.temperature,
        // seeded, with node-llama-cpp's sampling defaults (top-k 40, top-p 0.95, no min-p) in place of llama-server's min-p 0.05
        ...(a.temperature > 0 ? { seed: i, top_k: 40, top_p: 0.95, min_p: 0 } : {}),
        stream: true,
        cache_prompt: false,
      });
      // a connection per request: llama-server closes a streamed response's, and a kept-alive socket would be reused dead
      const req = request(
        `${base}/completion`,
        { method: "POST", agent: false, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
        (res) => {
          let first = NaN,
            tokens = 0,
            text = "",
            buffered = "";
          res.setEncoding("utf8");
          res.on("data", (piece: string) => {
            buffered += piece;
            const events = buffered.split("\n\n");
            buffered = events.pop()!;
            for (const event of events) {
              if (!event.startsWith("data: ")) continue;
              const data = JSON.parse(event.slice(6)) as { content?: string; stop?: boolean };
              if (data.stop) continue;
              tokens++;
              text += data.content ?? "";
              if (Number.isNaN(first)) first = performance.now();
            }
          });
          res.on("error", fail);
          res.on("end", () => ok({ tokens, rest: performance.now() - first, text }));
        },
      );
      req.on("error", fail);
      req.end(body);
    });
  return { one, close: () => stopped(child) };
}

const rate = (streams: Stream[]) => streams.reduce((n, s) => n + s.tokens - 1, 0) / (streams.reduce((t, s) => t + s.rest, 0) / 1000);
const µs = (tokensPerSecond: number) => 1e6 / tokensPerSecond;

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const modelPath = a.model ?? (await ensureTestModel(a.wideVocab ? "wideVocab" : "tiny"));
  // with --gpu the tools' build also gives node-llama-cpp its CUDA module, references or not
  const built = a.reference || a.gpu ? buildTools({ cuda: a.gpu }) : undefined;
  const tools = a.reference ? built : undefined;
  const engine = await startEngine(modelPath, a);
  const loaded = loadedBinaries();
  console.log(
    `model ${modelPath}\n${a.gpu ? "CUDA (-ngl 99 for llama.cpp's tools)" : "CPU"}, ${a.threads} threads (${cpus().length} cores); addon ${loaded.kilnAddon ? "Kiln's build" : "node-llama-cpp's own (no native loop)"} (folder ${loaded.folder ?? "?"}), ggml backends ${loaded.backends.join(", ")}; ${a.tokens} tokens a request (${a.temperature > 0 ? `temperature ${a.temperature}, seeded` : "greedy"}), ${a.requests} requests a side a round, ${a.rounds} rounds\n`,
  );
  const server = tools ? await startLlamaServer(tools.server, modelPath, a) : undefined;
  try {
    const sides: [string, (i: number) => Promise<Stream>][] = [
      ["native loop", (i) => engine.one(i, true)],
      ["batch path", (i) => engine.one(i, false)],
      ...(server ? [["llama-server", server.one] as [string, (i: number) => Promise<Stream>]] : []),
    ];
    for (const [, one] of sides) await one(0); // warm-up
    const perRound = new Map<string, number[]>([...sides.map(([name]) => [name, []] as [string, number[]]), ["llama-bench", []]]);
    const texts = new Map<string, string[]>(sides.map(([name]) => [name, []]));
    for (let r = 0; r < a.rounds; r++) {
      for (let k = 0; k < sides.length; k++) {
        const [name, one] = sides[(r + k) % sides.length]!;
        const streams: Stream[] = [];
        for (let q = 0; q < a.requests; q++) streams.push(await one(1 + r * a.requests + q));
        perRound.get(name)!.push(rate(streams));
        texts.get(name)!.push(...streams.map((s) => s.text));
      }
      if (tools) perRound.get("llama-bench")!.push(await llamaBench(tools.bench, modelPath, a));
      process.stderr.write(`round ${r + 1}/${a.rounds} done\n`);
    }
    const rows = [...perRound].filter(([, rates]) => rates.length > 0);
    console.table(
      rows.map(([name, rates]) => ({
        side: name,
        "tok/s (median of rounds)": median(rates).toFixed(0),
        "µs a token": µs(median(rates)).toFixed(1),
      })),
    );
    const ratio = (x: string, y: string) => perRound.get(x)!.map((v, r) => v / perRound.get(y)![r]!);
    console.log(`native loop ÷ batch path: ${spread(ratio("native loop", "batch path"))}`);
    if (tools) {
      console.log(`native loop ÷ llama-bench: ${spread(ratio("native loop", "llama-bench"))}; batch path ÷ llama-bench: ${spread(ratio("batch path", "llama-bench"))}`);
      console.log(`native loop ÷ llama-server: ${spread(ratio("native loop", "llama-server"))}; batch path ÷ llama-server: ${spread(ratio("batch path", "llama-server"))}`);
      const gap = (side: string) => median(perRound.get(side)!.map((v, r) => µs(v) - µs(perRound.get("llama-bench")![r]!)));
      console.log(
        `host work a token beyond llama-bench's decode (median of rounds): native loop ${gap("native loop").toFixed(1)} µs, batch path ${gap("batch path").toFixed(1)} µs`,
      );
    }
    const { decode, between } = engine.marks;
    console.log(
      `batch path, marks a token (median): the decode call to its result ${(1000 * median(decode)).toFixed(1)} µs, its result to the next decode call (node-llama-cpp's and Kiln's JavaScript) ${(1000 * median(between)).toFixed(1)} µs, over ${decode.length} tokens`,
    );
    const same = texts.get("native loop")!.every((t, i) => t === texts.get("batch path")![i]);
    console.log(`native loop and batch path texts: ${same ? "the same" : "DIFFERENT"}`);
    if (!same) process.exitCode = 1;
    for (const c of a.streams) {
      // c streams at once, taking turns round by round: as configured; the native loop not allowed (it runs only
      // once a single stream is left); the batch's tokens sampled on one thread. Aggregate tokens/s.
      const variants = { configured: [true, 0], "batch path only": [false, 0], "sampling on one thread": [true, 1] } as const;
      const names = Object.keys(variants) as (keyof typeof variants)[];
      const aggregate = new Map(names.map((name) => [name, [] as number[]]));
      for (let r = 0; r < a.rounds; r++) {
        for (let k = 0; k < names.length; k++) {
          const name = names[(r + k) % names.length]!;
          const [native, samplingThreads] = variants[name];
          const start = performance.now();
          const streams = await Promise.all(Array.from({ length: c }, (_, s) => engine.one(1000 + r * c + s, native, samplingThreads)));
          aggregate.get(name)!.push(streams.reduce((n, x) => n + x.tokens, 0) / ((performance.now() - start) / 1000));
        }
      }
      const base = aggregate.get("configured")!;
      const against = (name: keyof typeof variants) =>
        `${name} ${median(aggregate.get(name)!).toFixed(0)} (configured ÷ it ${spread(base.map((v, r) => v / aggregate.get(name)![r]!))})`;
      console.log(`${c} streams, aggregate tok/s: configured ${median(base).toFixed(0)}; ${against("batch path only")}; ${against("sampling on one thread")}`);
    }
  } finally {
    await server?.close();
    await engine.close();
  }
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);

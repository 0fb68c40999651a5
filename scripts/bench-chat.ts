/**
 * Chat benchmark: the whole fleet path against node-llama-cpp driven directly, same model file,
 * same threads, same sequences, measured in one run.
 *
 *   npm run bench:chat -- [--model PATH | --bench-model] [--threads N] [--tokens N] [--rounds N]
 *
 * Direct: one process, LlamaChat on N sequences of one context (what the agent does, minus the
 * network). Fleet: a `kiln dev` child process (scheduler + agent), streamed over HTTP SSE from
 * this process. For 1, 2, 4 and 8 concurrent streams it prints aggregate generated tokens/s,
 * median time to first token, and the ratios. Targets (issue 2): ≥ 0.98× direct tokens/s for one
 * stream and < 2 ms of added median time to first token.
 */
import { spawn } from "node:child_process";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { mkdtempSync } from "node:fs";
import { createInterface } from "node:readline";
import { getLlama, LlamaChat, type ChatHistoryItem } from "node-llama-cpp";
import { argValue, median } from "./lib/cli.js";
import { ensureTestModel } from "./make-test-models.js";

const CONCURRENCY = [1, 2, 4, 8];
const MODEL_ID = "famB-v3.1";

interface Args { model?: string; benchModel: boolean; threads: number; tokens: number; rounds: number }

function parseArgs(argv: string[]): Args {
  const get = (flag: string) => argValue(argv, flag);
  const model = get("--model");
  return {
    ...(model ? { model: resolve(model) } : {}),
    benchModel: argv.includes("--bench-model"),
    threads: Number(get("--threads") ?? Math.max(1, cpus().length - 1)),
    tokens: Number(get("--tokens") ?? 128),
    rounds: Number(get("--rounds") ?? 3),
  };
}

interface Sample { tokens: number; seconds: number; ttftMs: number[] }

const prompt = (i: number) => `Story number ${i}: once upon a time`;

/** Runs `rounds` rounds of c concurrent streams for each concurrency; stream s of round r gets prompt r·8+s and slot s. */
async function measure(rounds: number, one: (prompt: number, slot: number) => Promise<{ tokens: number; ttft: number }>): Promise<Map<number, Sample>> {
  const out = new Map<number, Sample>();
  for (const c of CONCURRENCY) {
    const sample: Sample = { tokens: 0, seconds: 0, ttftMs: [] };
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      const results = await Promise.all(Array.from({ length: c }, (_, s) => one(r * 8 + s, s)));
      sample.seconds += (performance.now() - t0) / 1000;
      for (const x of results) { sample.tokens += x.tokens; if (!Number.isNaN(x.ttft)) sample.ttftMs.push(x.ttft); }
    }
    out.set(c, sample);
  }
  return out;
}

async function benchDirect(modelPath: string, a: Args): Promise<Map<number, Sample>> {
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: a.threads });
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({ sequences: 8, contextSize: Math.min(2048, model.trainContextSize), threads: a.threads });
  const chats = Array.from({ length: 8 }, () => new LlamaChat({ contextSequence: context.getSequence(), autoDisposeSequence: false }));
  const one = async (i: number, slot: number): Promise<{ tokens: number; ttft: number }> => {
    const seq = chats[slot]!.sequence;
    const before = seq.tokenMeter.usedOutputTokens;
    const start = performance.now();
    let ttft = NaN;
    const history: ChatHistoryItem[] = [{ type: "user", text: prompt(i) }];
    await chats[slot]!.generateResponse(history, { maxTokens: a.tokens, temperature: 1, onTextChunk: () => { if (Number.isNaN(ttft)) ttft = performance.now() - start; } });
    return { tokens: seq.tokenMeter.usedOutputTokens - before, ttft };
  };
  await one(0, 0); // warm-up
  const out = await measure(a.rounds, one);
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return out;
}

async function benchFleet(modelPath: string, a: Args): Promise<Map<number, Sample>> {
  const child = spawn(process.execPath, [resolve("bin/kiln.js"), "dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
    "--db", join(mkdtempSync(join(tmpdir(), "kiln-bench-")), "kiln.db"), "--serve", `${MODEL_ID}=${modelPath}`,
    "--sequences", "8", "--context-size", "2048", "--threads", String(a.threads), "--gpu", "cpu", "--log-level", "warn"], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    let base = "", key = "";
    for await (const line of createInterface({ input: child.stdout! })) {
      if (line.includes("API base:")) base = line.split("API base:")[1]!.trim();
      if (line.includes("Dev key:")) { key = line.split("Dev key:")[1]!.trim(); break; }
    }
    const one = async (i: number): Promise<{ tokens: number; ttft: number }> => {
      const start = performance.now();
      const res = await fetch(`${base}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: prompt(i) }], max_tokens: a.tokens, temperature: 1, stream: true, stream_options: { include_usage: true } }),
      });
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let ttft = NaN, buffer = "", tokens = 0;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        if (Number.isNaN(ttft) && /"content":"[^"]/.test(buffer)) ttft = performance.now() - start;
      }
      const usage = /"completion_tokens":(\d+)/.exec(buffer);
      tokens = usage ? Number(usage[1]) : 0;
      return { tokens, ttft };
    };
    await one(0); // warm-up
    return await measure(a.rounds, (i) => one(i));
  } finally {
    child.kill("SIGTERM");
  }
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const modelPath = a.model ?? (await ensureTestModel(a.benchModel ? "bench" : "tiny"));
  console.log(`model ${modelPath}\nthreads ${a.threads}, ${a.tokens} tokens per stream, ${a.rounds} rounds per point, sequences 8\n`);
  const direct = await benchDirect(modelPath, a);
  const fleet = await benchFleet(modelPath, a);
  const rows = CONCURRENCY.map((c) => {
    const d = direct.get(c)!, f = fleet.get(c)!;
    const dr = d.tokens / d.seconds, fr = f.tokens / f.seconds;
    const dt = median(d.ttftMs), ft = median(f.ttftMs);
    return { streams: c, "direct tok/s": dr.toFixed(1), "fleet tok/s": fr.toFixed(1), "fleet ÷ direct": (fr / dr).toFixed(3), "direct TTFT ms": dt.toFixed(2), "fleet TTFT ms": ft.toFixed(2), "added TTFT ms": (ft - dt).toFixed(2) };
  });
  console.table(rows);
  const one = rows[0]!;
  console.log(`\n1 stream: fleet ÷ direct = ${one["fleet ÷ direct"]} (target ≥ 0.98); added median TTFT = ${one["added TTFT ms"]} ms (target < 2 ms)`);
}

main().catch((err: unknown) => { console.error(err); process.exit(1); });

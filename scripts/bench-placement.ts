/**
 * The scheduler's placement decision (scheduler/placement/plan.ts) over simulated fleets of 1,000
 * and 10,000 nodes, in one process: each node has 1 to 8 GPUs of 24, 48 or 80 GB, and idle or busy
 * replicas filling part of them. Printed per fleet: the decision's median and p99 time over ROUNDS
 * decisions for models of 8 to 400 GB (some placed whole, some split, some unloading idle replicas,
 * some too large), and, measured in the same run, the floor any decision pays — one pass that reads
 * every device of every node — with the ratio of the two. Target: a decision under 5 ms at 10,000 nodes.
 *
 * With `--cold`, also a cold model's start, weights on local disk, in the same run: a `kiln
 * scheduler` with a one-model catalog and a placeable `kiln agent` (no --serve), both running (the
 * agent registered, its backend loaded, the model sized), the time from the first chat request
 * (streamed, max_tokens 1) to its first token — placement, the load and the first token together —
 * against `llama-server` started on the same file, from its start to its first
 * token (llama.cpp's own tools, built once, about 10 minutes on two cores; scripts/build-llama.ts).
 * Printed: each side's median over ROUNDS_COLD starts and their ratio.
 *
 *   npm run bench:placement -- [--rounds 200] [--seed 1] [--cold [--model FILE] [--rounds-cold 3]]
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { defaultModelDir, TEST_MODELS } from "../fabricate/index.js";
import { choosePlacement, type PlacementNode, type PlacementReplica } from "../scheduler/placement/plan.js";
import { buildTools } from "./build-llama.js";
import { argValue, quantile } from "./lib/cli.js";
import { freePort, kilnKey, started, stopped } from "./lib/run.js";

const rounds = Number(argValue(process.argv, "--rounds") ?? "200");
let seed = Number(argValue(process.argv, "--seed") ?? "1");
const GB = 1e9;

/** A small seeded generator (mulberry32), so that runs compare. */
function random(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;

/** `full`: every GPU filled with replicas (most idle), so that each decision must choose what to unload. */
function fleet(size: number, full: boolean): PlacementNode[] {
  return Array.from({ length: size }, (_, n) => {
    const gpu = pick([24, 48, 80]) * GB;
    const count = pick([1, 1, 2, 4, 8]);
    const replicas: PlacementReplica[] = [];
    const used = new Array<number>(count).fill(0);
    for (let d = 0; d < count; d++) {
      // each GPU half full on average, with a few replicas of the catalog's models
      while (full ? used[d]! < gpu : random() < 0.5 && used[d]! < gpu * 0.7) {
        const bytes = Math.min(gpu - used[d]!, pick([4, 8, 16]) * GB);
        const onDevice = new Array<number>(count).fill(0);
        onDevice[d] = bytes;
        used[d]! += bytes;
        replicas.push({
          model: `model-${Math.floor(random() * 50)}`,
          bytes: onDevice,
          state: "ready",
          inflight: random() < (full ? 0.2 : 0.5) ? 1 : 0,
          lastUsedAt: Math.floor(random() * 1e6),
        });
      }
    }
    return { id: `node-${n}`, placeable: random() > 0.02, devices: used.map((u) => ({ totalBytes: gpu, freeBytes: gpu - u })), replicas };
  });
}

function time(fn: () => unknown): number {
  const started = performance.now();
  fn();
  return performance.now() - started;
}

function main(): void {
  const counts = new Map<string, number>();
  const rules = { replicasOf: (m: string) => counts.get(m) ?? 1, minReplicasOf: () => 1 };
  process.stdout.write("fleet          decision p50   p99      floor p50   decision/floor   outcomes\n");
  for (const [size, full] of [
    [1_000, false],
    [10_000, false],
    [1_000, true],
    [10_000, true],
  ] as const) {
    const nodes = fleet(size, full);
    counts.clear();
    for (const n of nodes) for (const r of n.replicas) counts.set(r.model, (counts.get(r.model) ?? 0) + 1);
    const decisions: number[] = [];
    const floors: number[] = [];
    const outcomes = new Map<string, number>();
    let sink = 0;
    // warm-up, not counted: the first decisions run before the JIT compiles them
    for (let i = 0; i < 20; i++) choosePlacement({ model: "warm-up", bytes: pick([8, 140, 400]) * GB }, nodes, rules);
    for (let i = 0; i < rounds; i++) {
      const bytes = pick([8, 16, 40, 70, 140, 400, 1000]) * GB;
      floors.push(
        time(() => {
          for (const n of nodes) for (const d of n.devices) sink += d.freeBytes;
        }),
      );
      let kind = "";
      decisions.push(time(() => (kind = choosePlacement({ model: `model-${i % 60}`, bytes }, nodes, rules).kind)));
      outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
    }
    const p50 = quantile(decisions, 0.5);
    const floor = quantile(floors, 0.5);
    process.stdout.write(
      `${`${size}${full ? " full" : ""}`.padEnd(15)}${p50.toFixed(3).padStart(8)} ms ${quantile(decisions, 0.99).toFixed(3).padStart(8)} ms ${floor.toFixed(3).padStart(8)} ms ${(p50 / floor).toFixed(1).padStart(12)}×     ${[...outcomes].map(([k, v]) => `${k} ${v}`).join(", ")}${sink < 0 ? " " : ""}\n`,
    );
    if (size === 10_000) process.stdout.write(`  target: a decision under 5 ms at 10,000 nodes: ${quantile(decisions, 0.99) < 5 ? "met" : "missed"} (p99)\n`);
  }
}

const NODE_TOKEN = "bench-placement-node-token-0123456789";

/** ms from now until the first streamed token of a one-token chat completion at `base` (retried while the server is not up). */
async function firstToken(base: string, key: string, model: string): Promise<number> {
  const begun = performance.now();
  for (;;) {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 1, stream: true }),
    }).catch(() => undefined);
    if (res?.ok && res.body) {
      const reader = res.body.getReader();
      let text = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString();
        if (/"content":"[^"]/.test(text)) {
          void reader.cancel();
          return performance.now() - begun;
        }
      }
      throw new Error(`no token from ${base}: ${text.slice(0, 500)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A cold start through the fleet: the time from the first request for a model no node holds to its first token. */
async function kilnCold(model: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-placement-"));
  const catalog = join(dir, "catalog.json");
  writeFileSync(catalog, JSON.stringify({ models: [{ id: "cold", source: resolve(model), context_size: 2048, sequences: 1 }] }));
  const db = join(dir, "kiln.db");
  const [http, grpc] = [await freePort(), await freePort()];
  const env = { KILN_NODE_TOKENS: NODE_TOKEN, KILN_LOG_LEVEL: "info" };
  const scheduler = await started(
    process.execPath,
    [resolve("bin/kiln.js"), "scheduler", "--http", `127.0.0.1:${http}`, "--grpc", `127.0.0.1:${grpc}`, "--db", db, "--catalog", catalog],
    /scheduler listening/,
    env,
  );
  const agent = await started(
    process.execPath,
    [
      resolve("bin/kiln.js"),
      "agent",
      "--scheduler",
      `127.0.0.1:${grpc}`,
      "--node-id",
      "cold-node",
      "--port",
      "0",
      "--host",
      "127.0.0.1",
      "--gpu",
      "cpu",
      "--threads",
      "2",
      "--data-dir",
      join(dir, "agent"),
    ],
    // a running fleet: the agent registered, and its llama.cpp backend loaded (it loads at start, in the background)
    /^(?=[\s\S]*registered with the scheduler)(?=[\s\S]*llama\.cpp binaries loaded)/,
    { ...env, KILN_NODE_TOKEN: NODE_TOKEN },
  );
  try {
    return await firstToken(`http://127.0.0.1:${http}`, kilnKey(db, "bench"), "cold");
  } finally {
    await stopped(agent);
    await stopped(scheduler);
  }
}

/** llama-server's cold start on the same file: from its start to its first token. */
async function llamaServerCold(server: string, model: string): Promise<number> {
  const port = await freePort();
  const begun = performance.now();
  const child = spawn(server, ["-m", model, "-c", "2048", "-np", "1", "-t", "2", "--host", "127.0.0.1", "--port", String(port), "--no-webui"], { stdio: "ignore" });
  try {
    await firstToken(`http://127.0.0.1:${port}`, "none", "model");
    return performance.now() - begun;
  } finally {
    await stopped(child);
  }
}

async function cold(): Promise<void> {
  const model = argValue(process.argv, "--model") ?? join(defaultModelDir(), TEST_MODELS.tiny.file);
  const rounds = Number(argValue(process.argv, "--rounds-cold") ?? "3");
  const tools = buildTools();
  const kiln: number[] = [];
  const reference: number[] = [];
  for (let i = 0; i < rounds; i++) {
    kiln.push(await kilnCold(model));
    reference.push(await llamaServerCold(tools.server, model));
  }
  const k = quantile(kiln, 0.5);
  const r = quantile(reference, 0.5);
  process.stdout.write(
    `\ncold start, ${model} (median of ${rounds}): kiln, first request to first token ${k.toFixed(0)} ms; llama-server, start to first token ${r.toFixed(0)} ms; kiln ÷ llama-server ${(k / r).toFixed(2)}\n`,
  );
}

main();
if (process.argv.includes("--cold")) await cold();

/**
 * Transcription through the fleet against the agent's own API, with `kiln scheduler` and one
 * `kiln agent` (the fabricated whisper model, CPU) as child processes on loopback:
 *
 * 1. Memory: one upload of SIZE bytes (a WAV of 48 kHz stereo silence: 1 GB is 1.55 h, under the 4-hour
 *    limit) to `POST /v1/audio/transcriptions`, streamed as multipart; both processes' resident memory
 *    (VmRSS) sampled every 20 ms from just before the upload to the answer. Baseline: each process's RSS,
 *    idle, just before. Target (issue 21): growth < 100 MB on each side for 1 GB.
 * 2. Time: the same file (jfk.mp3 with KILN_TEST_DATA, else 30 s of tone bursts made by ffmpeg)
 *    transcribed ROUNDS times each way, taking turns: through the fleet (one request, JSON answer) and
 *    through the agent's API (`POST /api/process`, its event stream until `done`, `GET /api/result`).
 *    Printed: the medians and agent ÷ fleet (target ≥ 0.97: the fleet costs at most 3 %).
 *
 *   npm run bench:audio-fleet -- [--size 1gb] [--rounds 5] [--skip-memory]
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ensureTestSpeechModels } from "../fabricate/index.js";
import { makeAudio, MB, parseSize, rss, toneBursts, wavHeader } from "./lib/media.js";
import { argValue, median } from "./lib/cli.js";
import { kilnKey } from "./lib/run.js";

const size = parseSize(argValue(process.argv, "--size") ?? "1gb");
const rounds = Number(argValue(process.argv, "--rounds") ?? "5");
const skipMemory = process.argv.includes("--skip-memory");
const NODE_TOKEN = "bench-audio-fleet-node-token-0123456789";

/** Starts `kiln …args`; resolves with the child, the first log line matching `ready`, and its log up to there. */
function start(args: string[], ready: RegExp, env: Record<string, string> = {}): Promise<{ child: ChildProcess; line: string; log: string }> {
  const child = spawn(process.execPath, [resolve("bin/kiln.js"), ...args], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, KILN_LOG_LEVEL: "info", ...env } });
  return new Promise((ok, fail) => {
    child.stdout!.setEncoding("utf8");
    let buffered = "";
    const onData = (d: string) => {
      buffered += d;
      const line = buffered.split("\n").find((l) => ready.test(l));
      if (line) {
        child.stdout!.off("data", onData);
        child.stdout!.resume();
        ok({ child, line, log: buffered });
      }
    };
    child.stdout!.on("data", onData);
    child.once("exit", (code) => fail(new Error(`kiln ${args[0]} exited (${code})`)));
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-audio-"));
  const speech = await ensureTestSpeechModels();
  const db = join(dir, "kiln.db");
  const key = kilnKey(db, "bench");
  const maxUpload = `${Math.ceil((size + MB) / MB)}mb`;
  const scheduler = await start(
    ["scheduler", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--db", db, "--spool-dir", join(dir, "spool"), "--max-audio-upload", maxUpload],
    /scheduler listening/,
    { KILN_NODE_TOKENS: NODE_TOKEN },
  );
  const { http, grpc } = JSON.parse(scheduler.line) as { http: string; grpc: string };
  const agent = await start(
    [
      "agent",
      "--scheduler",
      grpc,
      "--node-id",
      "bench",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--data-dir",
      join(dir, "agent"),
      "--whisper-dir",
      speech.whisperDir,
      "--vad-model",
      speech.vadModel,
      "--max-upload",
      maxUpload,
      "--gpu",
      "cpu",
      "--asr-parallel",
      "1",
    ],
    /registered with the scheduler/,
    { KILN_NODE_TOKEN: NODE_TOKEN },
  );
  const listening = agent.log.split("\n").find((l) => /transcription API listening/.test(l)) ?? "";
  const agentPort = Number(/"http":"[^"]*:(\d+)"/.exec(listening)?.[1]);
  const fleetBase = `http://${http}`;
  const agentBase = `http://127.0.0.1:${agentPort}`;
  await new Promise((r) => setTimeout(r, 1500)); // start-up allocations settle; the heartbeat tells the models

  const result: Record<string, unknown> = {};
  try {
    if (!skipMemory) result.memory = await memory(fleetBase, key, scheduler.child.pid!, agent.child.pid!);
    result.time = await timing(fleetBase, agentBase, key, dir);
  } finally {
    agent.child.kill("SIGTERM");
    scheduler.child.kill("SIGTERM");
    await Promise.all([agent.child, scheduler.child].map((c) => new Promise((r) => (c.exitCode !== null ? r(0) : c.once("exit", r)))));
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(result, null, 2));
}

/** One upload of `size` bytes through the fleet, both processes' RSS sampled from before it to its answer. */
async function memory(base: string, key: string, schedulerPid: number, agentPid: number) {
  const baseline = { scheduler: rss(schedulerPid), agent: rss(agentPid) };
  const peak = { ...baseline };
  const sampler = setInterval(() => {
    peak.scheduler = Math.max(peak.scheduler, rss(schedulerPid));
    peak.agent = Math.max(peak.agent, rss(agentPid));
  }, 20);
  const boundary = "kiln-bench-boundary";
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\nContent-Type: audio/wav\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const header = wavHeader(size - 44, 48_000, 2);
  const url = new URL(`${base}/v1/audio/transcriptions`);
  const started = performance.now();
  let uploadedAt = 0;
  const answer = await new Promise<{ status: number; body: string }>((ok, fail) => {
    const req = request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": head.length + size + tail.length },
    });
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => ok({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", fail);
    const chunk = Buffer.alloc(256 * 1024);
    let sent = header.length;
    req.write(head);
    req.write(header);
    const pump = (): void => {
      while (sent < size) {
        const n = Math.min(chunk.length, size - sent);
        sent += n;
        if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          req.once("drain", pump);
          return;
        }
      }
      req.end(tail, () => {
        uploadedAt = performance.now();
      });
    };
    pump();
  });
  clearInterval(sampler);
  const growth = { scheduler: peak.scheduler - baseline.scheduler, agent: peak.agent - baseline.agent };
  return {
    bytes: size,
    status: answer.status,
    answer: answer.body.slice(0, 200),
    uploadSeconds: Math.round((uploadedAt - started) / 100) / 10,
    totalSeconds: Math.round((performance.now() - started) / 100) / 10,
    schedulerRssMb: { baseline: Math.round(baseline.scheduler / MB), peak: Math.round(peak.scheduler / MB), growth: Math.round(growth.scheduler / MB) },
    agentRssMb: { baseline: Math.round(baseline.agent / MB), peak: Math.round(peak.agent / MB), growth: Math.round(growth.agent / MB) },
    targetGrowthMb: 100,
  };
}

/** The same file, ROUNDS times each way in turns: the fleet's one request against the agent's API. */
async function timing(fleetBase: string, agentBase: string, key: string, dir: string) {
  const data = process.env.KILN_TEST_DATA ? join(process.env.KILN_TEST_DATA, "audio", "jfk.mp3") : "";
  const file = data && existsSync(data) ? data : join(dir, "speech.mp3");
  if (file !== data) makeAudio(file, toneBursts(30));
  const bytes = new Uint8Array(readFileSync(file));
  const form = (name: string) => {
    const f = new FormData();
    f.append("model", name === "audio" ? "base" : "whisper-1");
    f.append(name, new Blob([bytes]), "speech.mp3");
    return f;
  };
  const viaFleet = async () => {
    const t0 = performance.now();
    const res = await fetch(`${fleetBase}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form("file") });
    const body = (await res.json()) as { text?: string };
    if (res.status !== 200 || typeof body.text !== "string") throw new Error(`fleet: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
    return performance.now() - t0;
  };
  const viaAgent = async () => {
    const t0 = performance.now();
    const res = await fetch(`${agentBase}/api/process`, { method: "POST", body: form("audio") });
    const job = (await res.json()) as { job_id: string; handle: string };
    if (res.status !== 202) throw new Error(`agent: ${res.status} ${JSON.stringify(job).slice(0, 200)}`);
    const auth = { authorization: `Bearer ${job.handle}` };
    const events = await fetch(`${agentBase}/api/jobs/${job.job_id}/events`, { headers: auth });
    const text = await events.text(); // the stream ends after its `done` event
    if (!/event: done/.test(text)) throw new Error("agent: the event stream ended without done");
    const result = await fetch(`${agentBase}/api/result/${job.job_id}?format=json`, { headers: auth });
    await result.json();
    return performance.now() - t0;
  };
  await viaFleet(); // warm both paths (the engine process, the page cache)
  await viaAgent();
  const fleet: number[] = [];
  const agent: number[] = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      fleet.push(await viaFleet());
      agent.push(await viaAgent());
    } else {
      agent.push(await viaAgent());
      fleet.push(await viaFleet());
    }
  }
  const f = median(fleet);
  const a = median(agent);
  return {
    file: file === data ? "jfk.mp3" : "30 s of tone bursts (mp3)",
    rounds,
    fleetMedianMs: Math.round(f),
    agentMedianMs: Math.round(a),
    agentOverFleet: Math.round((a / f) * 1000) / 1000,
    target: 0.97,
    fleetMs: fleet.map(Math.round),
    agentMs: agent.map(Math.round),
  };
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});

/**
 * The fleet under faults (`npm run soak`): a scheduler and two agents as `kiln` child processes on
 * loopback, streamed chat completions through the scheduler and transcription jobs (some with
 * speakers, some translated) on the agents, while, at moments drawn from a seed, the agents and the
 * scheduler are stopped (SIGTERM), killed (SIGKILL) and started again. At the end it checks that
 * nothing was lost:
 *
 * - every accepted job `completed` (none missing, none in `error` because of a restart);
 * - every chat request ended with its text or a clear error within its timeout (none hung);
 * - no upload or work file is left for a finished job;
 * - no process's memory went past its bound.
 *
 * A chat stream whose agent dies mid-generation cannot be saved: its client gets a clear error
 * (`agent_lost`) and the scheduler counts it in `kiln_completions_failed_total`. The processes run
 * on the fabricated test models (`fabricate/`): the soak is about faults, not about speed or text.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { defaultModelDir, ensureTestModel, ensureTestSpeechModels } from "../../fabricate/index.js";
import { uniformSource as random } from "../../fabricate/tensors.js";
import { makeAudio, MB, rss, twoVoices } from "./media.js";
import { freePort, kilnKey } from "./run.js";

export interface SoakOptions {
  /** How long the load and the faults run, in seconds; the jobs accepted are then waited for. */
  seconds: number;
  /** Draws the faults' moments, targets and kinds, and the workload's choices. */
  seed: number;
  /** Mean seconds between faults. Default 10. */
  faultEverySeconds?: number;
  /** A process whose resident memory passes this many MiB fails the soak. Default 2048. */
  memoryBoundMb?: number;
  /** Told each step (the CLI prints them). */
  log?: (line: string) => void;
}

export type FaultKind = "agent SIGTERM" | "agent SIGKILL" | "scheduler SIGTERM" | "scheduler SIGKILL";

export interface SoakReport {
  seconds: number;
  seed: number;
  faults: Record<FaultKind, number>;
  jobs: {
    /** Answered 202. */
    accepted: number;
    completed: number;
    /** Of the diarized and the translated ones. */
    withSpeakers: number;
    translated: number;
    /** Refused or cut off before a 202 (the agent was down or stopping): never accepted, so not lost. */
    notAccepted: number;
    /** Jobs processing on an agent when it was stopped or killed. */
    interrupted: number;
    /** Runs that took up steps an interrupted run had kept (decoded audio, chunks…). */
    resumed: number;
  };
  chat: {
    sent: number;
    /** Ended with their text and [DONE]. */
    completed: number;
    /** Ended with an error body or event naming a code (the agent or the scheduler went away). */
    clearErrors: number;
    /** The scheduler could not be reached (it was down): refused at once by the OS. */
    unreachable: number;
    /** Mid-generation streams failed, as the scheduler's `kiln_completions_failed_total` counted them (summed over its lives). */
    countedFailures: number;
  };
  /** Peak resident memory per process, MiB. */
  peakRssMb: Record<string, number>;
  /** What went wrong; empty when the soak passed. */
  failures: string[];
  passed: boolean;
}

const CHAT_TIMEOUT_MS = 60_000;
/** A catalog id (`--serve` takes catalog ids), served by the fabricated tiny model. */
const MODEL_ID = "famB-v3.1";
const NODE_TOKEN = "soak-node-token-0123456789";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A `kiln` process the soak starts, stops, kills and starts again, with its last lines of log. */
export class Managed {
  private child: ChildProcess | undefined;
  /** How many times it was started. */
  starts = 0;
  private exit: Promise<number | null> | undefined;
  readonly lines: string[] = [];
  peakRssMb = 0;
  /** Lines of its logs, over its lives, that matched `tally`. */
  tallied = 0;

  constructor(
    readonly name: string,
    private readonly args: string[],
    private readonly env: Record<string, string>,
    private readonly ready: RegExp,
    private readonly tally?: RegExp,
  ) {}

  /** Its process id while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  get up(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async start(): Promise<void> {
    const child = spawn(process.execPath, [resolve("bin/kiln.js"), ...this.args], {
      env: { ...process.env, KILN_LOG_LEVEL: "info", ...this.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    this.starts++;
    this.exit = new Promise((r) => child.once("exit", (code) => r(code)));
    let onReady: () => void = () => undefined;
    const ready = new Promise<void>((r) => (onReady = r));
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on("line", (line) => {
        this.lines.push(line);
        if (this.lines.length > 400) this.lines.splice(0, 200);
        if (this.ready.test(line)) onReady();
        if (this.tally?.test(line)) this.tallied++;
      });
    }
    const started = await Promise.race([ready.then(() => true), this.exit.then(() => false), sleep(60_000).then(() => false)]);
    if (!started) throw new Error(`${this.name} did not start:\n${this.lines.slice(-20).join("\n")}`);
  }

  /** Stops it with `signal` and waits for it to exit (SIGKILL after 30 s). */
  async stop(signal: NodeJS.Signals): Promise<number | null> {
    if (!this.child || !this.up) return null;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child?.kill("SIGKILL"), 30_000);
    const code = (await this.exit) ?? null;
    clearTimeout(timer);
    return code;
  }

  /** Kills it at once, without waiting (the soak's own exit). */
  kill(): void {
    if (this.up) this.child?.kill("SIGKILL");
  }

  /** Samples its resident memory. */
  sample(): void {
    if (!this.child?.pid || !this.up) return;
    try {
      this.peakRssMb = Math.max(this.peakRssMb, Math.round(rss(this.child.pid) / MB));
    } catch {
      // it exited between the check and the read
    }
  }
}

interface Agent {
  proc: Managed;
  base: string;
  dataDir: string;
}

interface AcceptedJob {
  agent: Agent;
  id: string;
  handle: string;
  kind: "plain" | "speakers" | "translated";
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? (() => undefined);
  const rand = random(options.seed);
  // The faults draw from their own sequence: their moments and kinds do not depend on how much load ran.
  const faultRand = random(options.seed ^ 0x5eed);
  const pick = <T>(items: readonly T[], from = rand): T => items[Math.floor(from() * items.length)]!;
  const root = mkdtempSync(join(tmpdir(), "kiln-soak-"));
  const report: SoakReport = {
    seconds: options.seconds,
    seed: options.seed,
    faults: { "agent SIGTERM": 0, "agent SIGKILL": 0, "scheduler SIGTERM": 0, "scheduler SIGKILL": 0 },
    jobs: { accepted: 0, completed: 0, withSpeakers: 0, translated: 0, notAccepted: 0, interrupted: 0, resumed: 0 },
    chat: { sent: 0, completed: 0, clearErrors: 0, unreachable: 0, countedFailures: 0 },
    peakRssMb: {},
    failures: [],
    passed: false,
  };
  const fail = (what: string) => {
    report.failures.push(what);
    log(`FAILURE: ${what}`);
  };

  // The models and the media: fabricated weights, audio made by ffmpeg.
  const chatModel = await ensureTestModel("tiny");
  const speech = await ensureTestSpeechModels(defaultModelDir());
  const media = join(root, "media");
  mkdirSync(media);
  // two "voices" with pauses (the energy VAD hears them as speech; the speakers differ in pitch)
  const clips = [30, 90].map((seconds) => readFileSync(makeAudio(join(media, `talk-${seconds}.flac`), twoVoices(seconds))));

  // The control plane: a scheduler on fixed ports (the agents dial it again after each restart), and a key.
  const db = join(root, "kiln.db");
  const key = kilnKey(db, "soak");
  const [httpPort, grpcPort] = [await freePort(), await freePort()];
  const scheduler = new Managed(
    "scheduler",
    ["scheduler", "--http", `127.0.0.1:${httpPort}`, "--grpc", `127.0.0.1:${grpcPort}`, "--db", db, "--heartbeat-ms", "500", "--drain-seconds", "5"],
    { KILN_NODE_TOKENS: NODE_TOKEN },
    /scheduler listening/,
  );
  const api = `http://127.0.0.1:${httpPort}`;
  const agents: Agent[] = [];
  for (const name of ["a", "b"]) {
    const port = await freePort();
    const dataDir = join(root, `agent-${name}`);
    const proc = new Managed(
      `agent ${name}`,
      [
        "agent",
        ...["--scheduler", `127.0.0.1:${grpcPort}`, "--node-id", `soak-${name}`, "--serve", `${MODEL_ID}=${chatModel}`],
        ...["--threads", "1", "--gpu", "cpu", "--context-size", "2048", "--sequences", "2", "--drain-seconds", "5"],
        ...["--whisper-dir", speech.whisperDir, "--vad-model", speech.vadModel, "--segmentation-model", speech.segmentationModel, "--embedding-model", speech.embeddingModel],
        ...["--asr-parallel", "1", "--asr-threads", "1", "--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDir],
      ],
      { KILN_NODE_TOKEN: NODE_TOKEN },
      /transcription API listening/,
      // a run that took up kept steps says so in its "transcribed" line
      /"resumed":\[/,
    );
    agents.push({ proc, base: `http://127.0.0.1:${port}`, dataDir });
  }
  const everyone = [scheduler, ...agents.map((a) => a.proc)];
  // if the soak itself dies (a test runner's timeout), its processes go with it
  const killAll = () => everyone.forEach((p) => p.kill());
  process.once("exit", killAll);
  const sampler = setInterval(() => everyone.forEach((p) => p.sample()), 500);

  let deadline = 0; // set once everything has started
  const running = () => Date.now() < deadline;
  const accepted: AcceptedJob[] = [];

  /** What the scheduler's metrics say of failed streams now (before a stop loses them). */
  const readCounted = async () => {
    const text = await fetch(`${api}/metrics`, { signal: AbortSignal.timeout(2000) })
      .then((r) => r.text())
      .catch(() => "");
    let sum = 0;
    for (const m of text.matchAll(/^kiln_completions_failed_total\{[^}]*\} (\d+)/gm)) sum += Number(m[1]);
    return sum;
  };

  let schedulerStops = 0;
  /** From just before the scheduler is stopped until it has started again. */
  let schedulerDown = false;
  const chat = async () => {
    while (running()) {
      report.chat.sent++;
      const stops = schedulerStops;
      let outcome = await oneChat(api, key, 8 + Math.floor(rand() * 40));
      // a stream can only end short when the scheduler itself was stopped under it
      if (outcome === "cut") outcome = schedulerStops !== stops || schedulerDown ? "clear error" : "ended short with neither [DONE] nor an error, while the scheduler ran";
      if (outcome === "completed") report.chat.completed++;
      else if (outcome === "clear error") report.chat.clearErrors++;
      else if (outcome === "unreachable") report.chat.unreachable++;
      else fail(`a chat request ${outcome}`);
      await sleep(100 + rand() * 400);
    }
  };

  const jobs = async () => {
    while (running()) {
      const agent = pick(agents);
      const clip = pick(clips);
      const kind = pick(["plain", "plain", "speakers", "translated"] as const);
      const fields: Record<string, string> = {
        temperature_increment: "0",
        ...(kind === "speakers" ? { speaker_diarization: "true" } : {}),
        ...(kind === "translated" ? { target_language: "de" } : {}),
      };
      const form = new FormData();
      for (const [k, v] of Object.entries(fields)) form.append(k, v);
      form.append("audio", new Blob([clip]), "talk.flac");
      try {
        const res = await fetch(`${agent.base}/api/process`, { method: "POST", body: form, signal: AbortSignal.timeout(30_000) });
        const body = (await res.json()) as { job_id?: string; handle?: string };
        if (res.status === 202 && body.job_id && body.handle) {
          const job: AcceptedJob = { agent, id: body.job_id, handle: body.handle, kind };
          accepted.push(job);
          processing.add(job);
          report.jobs.accepted++;
        } else if (res.status === 503)
          report.jobs.notAccepted++; // draining, or the queue full: refused, nothing promised
        else fail(`an upload to ${agent.proc.name} was answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
      } catch {
        report.jobs.notAccepted++; // the agent was down or went down mid-upload: no 202, nothing promised
      }
      await sleep(1500 + rand() * 2500);
    }
  };

  /** Whether a job is still processing, as its agent last said (polled while the load runs). */
  const processing = new Set<AcceptedJob>();
  const watch = async () => {
    while (running()) {
      for (const job of processing) {
        const view = await statusOf(job);
        if (view.status && view.status !== "processing") processing.delete(job);
      }
      await sleep(500);
    }
  };

  const faults = async () => {
    const mean = options.faultEverySeconds ?? 10;
    while (true) {
      await sleep(-Math.log(1 - faultRand()) * mean * 1000);
      if (!running()) return;
      // an agent in the middle of a job, when one is: the faults are meant to land on work
      const busy = agents.filter((a) => [...processing].some((j) => j.agent === a));
      const target = faultRand() < 0.75 ? pick(busy.length > 0 ? busy : agents, faultRand).proc : scheduler;
      if (target !== scheduler) report.jobs.interrupted += [...processing].filter((j) => j.agent.proc === target).length;
      const signal: NodeJS.Signals = faultRand() < 0.5 ? "SIGTERM" : "SIGKILL";
      const kind = `${target === scheduler ? "scheduler" : "agent"} ${signal}` as FaultKind;
      if (target === scheduler) {
        report.chat.countedFailures += await readCounted(); // its count goes with it
        schedulerStops++;
        schedulerDown = true;
      }
      const code = await target.stop(signal);
      report.faults[kind]++;
      log(`fault: ${target.name} ${signal} (exit ${code})`);
      if (signal === "SIGTERM" && code !== 0) fail(`${target.name} exited ${code} on SIGTERM`);
      await sleep(500 + faultRand() * 2500);
      await target.start();
      schedulerDown = false;
      log(`restarted: ${target.name}`);
    }
  };

  try {
    await scheduler.start();
    await Promise.all(agents.map((a) => a.proc.start()));
    log(`started: scheduler ${api}, agents ${agents.map((a) => a.base).join(", ")}`);
    deadline = Date.now() + options.seconds * 1000;
    await Promise.all([chat(), chat(), jobs(), watch(), faults()]);
    log(`load over: ${report.jobs.accepted} jobs accepted, ${report.chat.sent} chat requests; waiting for the jobs`);

    // Every accepted job must complete (on its own agent, which keeps it across restarts).
    const waitUntil = Date.now() + 300_000;
    for (const job of accepted) {
      let view: { status?: string; error?: string } = {};
      while (Date.now() < waitUntil) {
        view = await statusOf(job);
        if (view.status && view.status !== "processing") break;
        await sleep(500);
      }
      if (view.status === "completed") {
        report.jobs.completed++;
        if (job.kind === "speakers") report.jobs.withSpeakers++;
        if (job.kind === "translated") report.jobs.translated++;
      } else fail(`job ${job.id} (${job.kind}, on ${job.agent.proc.name}) ended ${view.status ?? "unanswered"}${view.error ? `: ${view.error}` : ""}`);
    }

    // Nothing left behind: every job has ended, so no upload or work folder may remain.
    // (a job is marked completed just before its files go: a moment's grace)
    for (const agent of agents) {
      for (const dir of ["uploads", "work"]) {
        let left = readdirSafe(join(agent.dataDir, dir));
        for (let i = 0; i < 10 && left.length > 0; i++) {
          await sleep(200);
          left = readdirSafe(join(agent.dataDir, dir));
        }
        if (left.length > 0) fail(`${agent.proc.name} left ${left.length} entries in ${dir}/ after every job ended`);
      }
    }
    report.chat.countedFailures += await readCounted();
    report.jobs.resumed = agents.reduce((n, a) => n + a.proc.tallied, 0);
  } finally {
    clearInterval(sampler);
    await Promise.all(everyone.map((p) => p.stop("SIGTERM")));
    process.removeListener("exit", killAll);
    rmSync(root, { recursive: true, force: true });
  }

  const bound = options.memoryBoundMb ?? 2048;
  for (const p of everyone) {
    report.peakRssMb[p.name] = p.peakRssMb;
    if (p.peakRssMb > bound) fail(`${p.name} reached ${p.peakRssMb} MiB, past the ${bound} MiB bound`);
  }
  if (report.jobs.accepted === 0) fail("no job was accepted: the soak tested nothing");
  if (report.jobs.interrupted === 0) fail("no fault landed on a job in progress: the soak tested no resume");
  else if (report.jobs.resumed === 0) fail(`${report.jobs.interrupted} jobs were interrupted, and no run took up the steps one had kept`);
  if (report.chat.completed === 0) fail("no chat request completed: the soak tested nothing");
  report.passed = report.failures.length === 0;
  return report;
}

/** A job's status as its agent tells it; empty when the agent does not answer. */
async function statusOf(job: AcceptedJob): Promise<{ status?: string; error?: string }> {
  return fetch(`${job.agent.base}/api/status/${job.id}`, { headers: { authorization: `Bearer ${job.handle}` }, signal: AbortSignal.timeout(10_000) })
    .then((r) => r.json() as Promise<{ status?: string; error?: string }>)
    .catch(() => ({}));
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * One streamed chat completion: "completed" (its text and [DONE]), "clear error" (an error body or
 * event with a code), "unreachable" (connection refused), "cut" (the connection closed mid-answer),
 * or what went wrong.
 */
async function oneChat(api: string, key: string, maxTokens: number): Promise<string> {
  const signal = AbortSignal.timeout(CHAT_TIMEOUT_MS);
  let res: Response;
  try {
    res = await fetch(`${api}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL_ID, stream: true, max_tokens: maxTokens, messages: [{ role: "user", content: "Tell me about kilns." }] }),
      signal,
    });
  } catch (err) {
    const code = (err as { cause?: { code?: string } }).cause?.code;
    if (code === "ECONNREFUSED") return "unreachable";
    if (signal.aborted) return "hung: no answer within its timeout";
    return code === "ECONNRESET" || code === "UND_ERR_SOCKET" ? "cut" : `failed without a clear error (${String(err)})`;
  }
  let text: string;
  try {
    text = await res.text();
  } catch {
    if (signal.aborted) return "hung: its stream did not end within its timeout";
    return "cut";
  }
  if (res.status !== 200) {
    try {
      const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
      return body.error?.code && body.error.message ? "clear error" : `answered ${res.status} without an error body`;
    } catch {
      return `answered ${res.status} without an error body`;
    }
  }
  if (/"error":\{[^}]*"code":"[a-z_]+"/.test(text)) return "clear error";
  if (!text.includes("data: [DONE]")) return "cut";
  return /"content":"[^"]/.test(text) ? "completed" : "completed with no text";
}

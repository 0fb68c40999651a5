/**
 * Helpers for the transcription suites: a transcription-only agent (in process or spawned) on
 * the fabricated whisper and energy-VAD models, audio made by ffmpeg, uploads and polling.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { openAsBlob, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { parseAgentConfig } from "../../config/index.js";
import { createLogger } from "../../core/log.js";
import { startAgent, type AgentHandle } from "../../agent/index.js";
import { ffmpegPath } from "../../agent/asr/ffmpeg.js";
import { defaultModelDir, TEST_SPEECH } from "../../fabricate/index.js";
import { spawnKiln, tempDir, until, type KilnProcess } from "./fleet.js";

export const TEST_WHISPER_DIR = join(defaultModelDir(), TEST_SPEECH.whisperDir);
export const TEST_VAD = join(defaultModelDir(), TEST_SPEECH.vad);
export const TEST_SEGMENTATION = join(defaultModelDir(), TEST_SPEECH.segmentation);
export const TEST_EMBEDDING = join(defaultModelDir(), TEST_SPEECH.embedding);

import { toneBursts } from "../../scripts/lib/media.js";
export { toneBursts, twoVoices } from "../../scripts/lib/media.js";

/**
 * Seconds of `toneBursts` that the fabricated whisper model decodes in well under a second, for a test
 * that needs a job with some speech, not a length. Counter to intuition, shorter clips cost more: in
 * 1–12 s of bursts, whisper's 30 s window is mostly padding, over which the random-weight model writes
 * to its token limit and fails every fallback test, so the default temperature fallback decodes the
 * window again at each step (2–6 s a job on 2 cores); 14–32 s of bursts it decodes once.
 */
export const QUICK_SPEECH_SECONDS = 16;

/** Makes `name` in `dir` with ffmpeg from a lavfi audio source (and a test video for video containers). */
export function makeMedia(dir: string, name: string, options: { seconds?: number; video?: boolean; audio?: boolean; source?: string } = {}): string {
  const out = join(dir, name);
  const seconds = options.seconds ?? 6;
  const inputs: string[] = [];
  if (options.video) inputs.push("-f", "lavfi", "-i", `testsrc=size=64x48:rate=5:duration=${seconds}`);
  if (options.audio !== false) inputs.push("-f", "lavfi", "-i", options.source ?? toneBursts(seconds));
  const extra = options.video ? ["-pix_fmt", "yuv420p", "-shortest"] : [];
  execFileSync(ffmpegPath(), ["-v", "error", "-y", ...inputs, ...extra, out]);
  return out;
}

export interface Transcription {
  base: string;
  agent: AgentHandle;
}

/** A transcription-only agent in this process, on an OS-picked port. */
export async function startTranscription(raw: Record<string, string> = {}): Promise<Transcription> {
  const agent = await startAgent(
    parseAgentConfig({
      host: "127.0.0.1",
      port: "0",
      dataDir: tempDir(),
      whisperDir: TEST_WHISPER_DIR,
      vadModel: TEST_VAD,
      asrParallel: "2",
      asrThreads: "2",
      gpu: "cpu",
      // no test reaches the internet: an agent fetches models only from a test's own hub
      offline: "true",
      ...raw,
    }),
    createLogger("test", (process.env.KILN_TEST_LOG_LEVEL as "info" | undefined) ?? "silent"),
  );
  return { agent, base: `http://127.0.0.1:${agent.http.port}` };
}

/** `kiln agent` as a process (transcription only); resolves once its API listens. */
export async function spawnTranscription(dataDir: string, extra: string[] = [], env: Record<string, string> = {}): Promise<{ proc: KilnProcess; base: string }> {
  const proc = spawnKiln(["agent", "--whisper-dir", TEST_WHISPER_DIR, "--vad-model", TEST_VAD, "--asr-parallel", "1", "--asr-threads", "1", "--gpu", "cpu", ...extra], {
    KILN_DATA_DIR: dataDir,
    ...env,
  });
  const line = await proc.waitFor(/transcription API listening/, 20_000);
  const port = Number(/"http":"[^"]*:(\d+)"/.exec(line)?.[1]);
  return { proc, base: `http://127.0.0.1:${port}` };
}

/** The handles of the jobs `upload` submitted, by job id: reading a job needs its handle (or the agent token). */
const handles = new Map<string, string>();
export const handleOf = (jobId: string): string | undefined => handles.get(jobId);

/** POSTs files (paths, as `audio` parts) and fields to /api/process; remembers the jobs' handles. */
export async function upload(base: string, files: string[], fields: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  for (const f of files) form.append("audio", await openAsBlob(f), basename(f));
  const res = await fetch(`${base}/api/process`, { method: "POST", body: form, headers });
  const body = await res.json();
  for (const job of body.jobs ?? (body.job_id ? [body] : [])) handles.set(job.job_id, job.handle);
  return { status: res.status, body };
}

/**
 * `fetch` that, for a job route (`/api/status|result|jobs/<id>`) of a job `upload` submitted and
 * no `authorization` given, sends that job's handle.
 */
export function fetchJob(url: string, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<Response> {
  const id = /\/api\/(?:status|result|jobs)\/([^/?]+)/.exec(url)?.[1];
  const handle = id ? handles.get(id) : undefined;
  const headers: Record<string, string> = { ...init.headers };
  if (handle && !Object.keys(headers).some((k) => k.toLowerCase() === "authorization")) headers.authorization = `Bearer ${handle}`;
  return fetch(url, { ...init, headers });
}

export async function getJson(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetchJob(url, { headers });
  return { status: res.status, body: await res.json() };
}

/** What one poll of a job's status said. */
export interface JobSample {
  /** When it was read (ms). */
  at: number;
  phase: string | null;
  progress: number;
  eta: number;
}

/** Polls a job until it leaves `processing`; returns the final view and every progress, ETA and phase seen. */
export async function waitForJob(base: string, id: string, timeoutMs = 60_000): Promise<{ view: any; progress: number[]; etas: unknown[]; samples: JobSample[] }> {
  const progress: number[] = [];
  const etas: unknown[] = [];
  const samples: JobSample[] = [];
  let view: any;
  await until(
    async () => {
      view = (await getJson(`${base}/api/status/${id}`)).body;
      progress.push(view.progress);
      etas.push(view.estimated_time_remaining);
      samples.push({ at: Date.now(), phase: view.phase, progress: view.progress, eta: view.estimated_time_remaining });
      return view.status !== "processing";
    },
    timeoutMs,
    `job ${id}`,
  );
  return { view, progress, etas, samples };
}

/**
 * Whether the ffmpeg the suites use takes `-readrate` (ffmpeg 5.0 and later; not the npm-shipped 2018
 * build, which refuses it: "Error splitting the argument list: Option not found").
 */
export function ffmpegReadsAtRate(): boolean {
  return spawnSync(ffmpegPath(), ["-v", "error", "-readrate", "1", "-f", "lavfi", "-i", "anullsrc", "-t", "0.01", "-f", "null", "-"], { stdio: "ignore" }).status === 0;
}

/**
 * An ffmpeg for `KILN_FFMPEG` that is the real one, except that it decodes reading its input at
 * `rate` times the audio's own speed: decoding lasts long enough for a test to stop the agent in it.
 * Needs an ffmpeg that takes `-readrate` (`ffmpegReadsAtRate`).
 */
export function slowDecodingFfmpeg(rate: number): string {
  const script = join(tempDir(), "ffmpeg");
  writeFileSync(script, `#!/bin/sh\ncase "$*" in\n  *f32le*) exec ${ffmpegPath()} -readrate ${rate} "$@" ;;\nesac\nexec ${ffmpegPath()} "$@"\n`, { mode: 0o755 });
  return script;
}

/**
 * The transcription agent as a real process: an oversized upload is refused while it streams,
 * without memory growth or leftovers, and a killed agent loses no result and leaves no job stuck.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { httpBase, inProcessScheduler, spawnKiln, tempDir, until, NODE_TOKEN, type KilnProcess } from "./helpers/fleet.js";
import { ffmpegPath } from "../agent/asr/ffmpeg.js";
import {
  ffmpegReadsAtRate,
  getJson,
  makeMedia,
  QUICK_SPEECH_SECONDS,
  slowDecodingFfmpeg,
  spawnTranscription,
  TEST_VAD,
  TEST_WHISPER_DIR,
  upload,
  waitForJob,
} from "./helpers/speech.js";

const procs: KilnProcess[] = [];

/**
 * An ffmpeg for `KILN_FFMPEG` that fails as a build lacking an option Kiln passes does (the
 * npm-shipped 2018 build given -readrate): on every run but `-version`, or, with `afterStartCheck`,
 * on every run but those of the agent's start check (the real ffmpeg runs those, and lists its demuxers, decoders, muxers and encoders).
 */
function refusingFfmpeg(afterStartCheck = false): string {
  const script = join(tempDir(), "ffmpeg");
  const real = afterStartCheck ? `  *kiln-ffmpeg-check-*|*-demuxers*|*-decoders*|*-muxers*|*-encoders*) exec '${ffmpegPath()}' "$@" ;;\n` : "";
  writeFileSync(
    script,
    `#!/bin/sh\ncase "$*" in\n  *-version*) echo 'ffmpeg version N-47683-g0e8eb07980-static'; exit 0 ;;\n${real}esac\necho "Unrecognized option 'readrate'." >&2\necho 'Error splitting the argument list: Option not found' >&2\nexit 1\n`,
    { mode: 0o755 },
  );
  return script;
}
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop("SIGKILL")));
});

function rssBytes(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb) * 1024;
}

/** Streams a multipart body with one `audio` part of `size` bytes; resolves with the answer. */
function streamUpload(base: string, size: number): Promise<{ status: number; body: any }> {
  const boundary = "----kiln-test-boundary";
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="audio"; filename="big.wav"\r\nContent-Type: audio/wav\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const block = Buffer.alloc(1024 * 1024, 7);
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/api/process`,
      {
        method: "POST",
        headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": head.length + size + tail.length },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    let sent = 0;
    const pump = () => {
      if (sent === 0) req.write(head);
      while (sent < size) {
        const n = Math.min(block.length, size - sent);
        sent += n;
        if (!req.write(n === block.length ? block : block.subarray(0, n))) return void req.once("drain", pump);
      }
      req.end(tail);
    };
    pump();
  });
}

/** The files in an agent's data folder besides its job database. */
function filesKept(dataDir: string): string[] {
  return readdirSync(dataDir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && !e.name.startsWith("jobs.db"))
    .map((e) => e.name);
}

describe("transcription agent process", () => {
  it("refuses 1 GB + 1 byte with 413 while streaming, within 100 MB of its memory, leaving no file", async () => {
    const dataDir = tempDir();
    const { proc, base } = await spawnTranscription(dataDir);
    procs.push(proc);
    const pid = proc.child.pid!;
    const before = rssBytes(pid);
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssBytes(pid));
    }, 50);
    const res = await streamUpload(base, 1024 ** 3 + 1).finally(() => clearInterval(sampler));
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "file_too_large" });
    expect(res.body.error.message).toMatch(/^audio:/);
    expect(peak - before).toBeLessThan(100 * 1024 * 1024);
    expect(readdirSync(join(dataDir, "uploads"))).toEqual([]);
    // The agent is still fine afterwards.
    expect((await getJson(`${base}/api/models`)).status).toBe(200);
  }, 120_000);

  it("an agent without its voice-activity model answers /api/process with 503 engine_unavailable naming it, before storing anything", async () => {
    const dataDir = tempDir();
    const missing = join(tempDir(), "silero_vad.onnx");
    const { proc, base } = await spawnTranscription(dataDir, ["--vad-model", missing]);
    procs.push(proc);
    const res = await upload(base, [makeMedia(tempDir(), "talk.wav", { seconds: 3 })]);
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ type: "service_unavailable_error", code: "engine_unavailable" });
    expect(res.body.error.message).toContain(`voice-activity model ${missing} cannot be read`);
    expect(res.body.error.message).toContain("--vad-model");
    expect(filesKept(dataDir)).toEqual([]); // nothing of the body was kept
    const ready = await getJson(`${base}/readyz`);
    expect(ready.body.transcription.vad_model).toBe(false); // readiness says the same
  }, 60_000);

  it("an agent whose ffmpeg cannot run Kiln's decode refuses transcription at start: its log names ffmpeg and the one it needs, /api/process is a 503 naming ffmpeg, /readyz says why", async () => {
    const dataDir = tempDir();
    const ffmpeg = refusingFfmpeg();
    const { proc, base } = await spawnTranscription(dataDir, [], { KILN_FFMPEG: ffmpeg });
    procs.push(proc);
    const refusal = proc.lines.find((l) => l.includes("transcription refused"));
    expect(refusal).toContain(`"ffmpeg":"${ffmpeg}"`);
    expect(refusal).toContain("ffmpeg failed (Error splitting the argument list: Option not found)");
    expect(refusal).toContain("ffmpeg ≥ 4.0 with -protocol_whitelist and -format_whitelist");
    expect(refusal).toContain("install Debian's ffmpeg (apt-get install ffmpeg) or set KILN_FFMPEG=/path");
    const res = await upload(base, [makeMedia(tempDir(), "talk.flac", { seconds: 3 })]);
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ type: "service_unavailable_error", code: "engine_unavailable" });
    expect(res.body.error.message).toMatch(
      /ffmpeg cannot decode here \(ffmpeg failed \(Error splitting the argument list: Option not found\).*install Debian's ffmpeg or set KILN_FFMPEG/,
    );
    expect(filesKept(dataDir)).toEqual([]); // nothing of the body was kept
    const ready = await getJson(`${base}/readyz`);
    expect(ready.body.ready).toBe(true); // a chat node would still serve: transcription is reported, not required
    expect(ready.body.transcription).toMatchObject({ ffmpeg: false, ffmpeg_error: expect.stringContaining("Option not found") });
  }, 60_000);

  it("an agent whose ffmpeg fails the start check does not offer transcription to its scheduler: a lone node gives the scheduler's 503 model_unavailable, not a 502 after it refused the job", async () => {
    const scheduler = await inProcessScheduler();
    try {
      const { token: key } = await scheduler.keys.create({ account: "no-ffmpeg", tier: "pro" });
      const args = ["agent", "--scheduler", `127.0.0.1:${scheduler.grpc.port}`, "--node-id", "no-ffmpeg", "--whisper-dir", TEST_WHISPER_DIR, "--vad-model", TEST_VAD];
      const proc = spawnKiln([...args, "--asr-parallel", "1", "--asr-threads", "1", "--gpu", "cpu"], { KILN_NODE_TOKEN: NODE_TOKEN, KILN_FFMPEG: refusingFfmpeg() });
      procs.push(proc);
      await until(() => scheduler.fleet.snapshot().length === 1, 30_000, "the agent to join");
      expect(proc.lines.some((l) => l.includes("transcription refused"))).toBe(true);
      expect(scheduler.fleet.transcriptionModels()).toEqual([]);
      const models = (await (await fetch(`${httpBase(scheduler)}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).not.toContain("whisper-1");
      const form = new FormData();
      form.append("model", "whisper-1");
      form.append("file", new Blob([new Uint8Array(readFileSync(makeMedia(tempDir(), "talk.wav", { seconds: 3 })))]), "talk.wav");
      const res = await fetch(`${httpBase(scheduler)}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect({ status: res.status, code: body.error.code }).toEqual({ status: 503, code: "model_unavailable" });
      expect(proc.lines.some((l) => l.includes("fleet transcription refused"))).toBe(false); // the node was never asked
      expect(proc.lines.some((l) => l.includes("registers without transcription"))).toBe(true);
    } finally {
      await scheduler.close();
    }
  }, 60_000);

  it("a job whose decode ffmpeg itself fails (an option it lacks) ends as an engine fault, never as bad input", async () => {
    const { proc, base } = await spawnTranscription(tempDir(), [], { KILN_FFMPEG: refusingFfmpeg(true) });
    procs.push(proc);
    expect(proc.lines.some((l) => l.includes("ffmpeg runs the decode"))).toBe(true); // the start check passed
    expect((await getJson(`${base}/readyz`)).body.transcription.ffmpeg).toBe(true);
    const res = await upload(base, [makeMedia(tempDir(), "talk.flac", { seconds: 3 })]);
    expect(res.status).toBe(202);
    const { view } = await waitForJob(base, res.body.job_id);
    expect(view.status).toBe("error");
    expect(view.error).toMatch(/^engine fault: ffmpeg failed \(Error splitting the argument list: Option not found\) while reading talk\.flac/);
    expect(view.error).not.toMatch(/bad input/);
  }, 60_000);

  it("a transcription-only agent (no --serve) never loads llama.cpp, and transcribes", async () => {
    const { proc, base } = await spawnTranscription(tempDir());
    procs.push(proc);
    const media = tempDir();
    const res = await upload(base, [makeMedia(media, "solo.wav", { seconds: QUICK_SPEECH_SECONDS })]);
    expect((await waitForJob(base, res.body.job_id)).view.status).toBe("completed");
    const maps = readFileSync(`/proc/${proc.child.pid!}/maps`, "utf8");
    expect(maps).toMatch(/better_sqlite3\.node/); // the maps are read right: a native addon it does load
    expect(maps).not.toMatch(/node-llama-cpp|llama-addon|libllama|libggml/);
  }, 60_000);

  it("after SIGKILL mid-whisper, keeps completed results and resumes the job from its last finished chunk: the finished ones are not decoded again", async () => {
    const dataDir = tempDir();
    const media = tempDir();
    let agent = await spawnTranscription(dataDir);
    procs.push(agent.proc);
    const short = await upload(agent.base, [makeMedia(media, "short.wav", { seconds: QUICK_SPEECH_SECONDS })]);
    const done = await waitForJob(agent.base, short.body.job_id);
    expect(done.view.status).toBe("completed");

    const long = await upload(agent.base, [makeMedia(media, "long.flac", { seconds: 240 })]);
    expect(long.status).toBe(202);
    const id = long.body.job_id as string;
    const chunkLog = join(dataDir, "work", id, "chunks.jsonl");
    const finished = () => (existsSync(chunkLog) ? readFileSync(chunkLog, "utf8").split("\n").filter(Boolean).length : 0);
    await until(() => finished() >= 2, 120_000, "two chunks of the long job to finish");
    expect((await getJson(`${agent.base}/api/status/${id}`)).body).toMatchObject({ status: "processing", phase: "transcribing" });
    await agent.proc.stop("SIGKILL");
    const kept = finished(); // read once the process is gone: nothing more is written

    agent = await spawnTranscription(dataDir);
    procs.push(agent.proc);
    const still = await getJson(`${agent.base}/api/status/${short.body.job_id}`);
    expect(still.body.status).toBe("completed");
    expect(still.body.result).toEqual(done.view.result);
    const resumed = await waitForJob(agent.base, id, 180_000);
    expect(resumed.view.status, resumed.view.error).toBe("completed");
    expect(resumed.view.result.duration).toBeCloseTo(240, 0);
    const line = agent.proc.lines.find((l) => /"msg":"transcribed"/.test(l))!;

    const [, keptNow, total] = /"(\d+) of (\d+) chunks"/.exec(line) ?? [];
    expect(Number(keptNow)).toBe(kept);
    expect(line).toMatch(/"decoded audio"/);
    const metrics = await (await fetch(`${agent.base}/metrics`)).text();
    const decoded = Number(/^kiln_asr_chunks_decoded_total(?:{[^}]*})? (\d+)/m.exec(metrics)?.[1]);
    expect(decoded).toBe(Number(total) - kept);
    // the checkpoints go with the finished job (just after it is marked completed: a moment's grace)
    await until(() => readdirSync(join(dataDir, "work")).length === 0, 5000, "the finished job's checkpoints to go");
    expect(readdirSync(join(dataDir, "work"))).toEqual([]);
  }, 360_000);

  // -readrate slows the decode down; the npm-shipped 2018 ffmpeg lacks it (Debian's has it)
  const readrate = ffmpegReadsAtRate();
  (readrate ? it : it.skip)(
    `after SIGTERM while ffmpeg decodes, the job is kept (not failed), resumes at the next start and completes${readrate ? "" : " (skipped: this ffmpeg lacks -readrate, which ffmpeg 5.0 added; apt-get install ffmpeg)"}`,
    async () => {
      const dataDir = tempDir();
      const media = tempDir();
      const env = { KILN_FFMPEG: slowDecodingFfmpeg(10) };
      let agent = await spawnTranscription(dataDir, [], env);
      procs.push(agent.proc);
      // 30 s read at 10 times its speed: 3 s of decoding to stop the agent in, at each start
      const res = await upload(agent.base, [makeMedia(media, "talk.flac", { seconds: 30 })]);
      const id = res.body.job_id as string;
      await until(async () => (await getJson(`${agent.base}/api/status/${id}`)).body.phase === "decoding", 30_000, "the job to be decoding");
      agent.proc.child.kill("SIGTERM");
      expect(await agent.proc.exited).toBe(0);
      expect(agent.proc.lines.some((l) => /interrupted by shutdown/.test(l) && /"phase":"decoding"/.test(l))).toBe(true);

      agent = await spawnTranscription(dataDir, [], env);
      procs.push(agent.proc);
      const resumed = await waitForJob(agent.base, id, 120_000);
      expect(resumed.view.status, resumed.view.error).toBe("completed");
      expect(resumed.view.result.duration).toBeCloseTo(30, 0);
      expect(resumed.samples.map((s) => s.phase)).toContain("decoding"); // decoded again: the half-written audio was not kept
    },
    240_000,
  );

  it("on SIGTERM stops between chunks and exits 0; running and queued jobs complete after the restart", async () => {
    const dataDir = tempDir();
    const media = tempDir();
    let agent = await spawnTranscription(dataDir, ["--asr-jobs", "1"]);
    procs.push(agent.proc);
    const res = await upload(agent.base, [makeMedia(media, "a.flac", { seconds: 150 }), makeMedia(media, "b.flac", { seconds: 30 })]);
    const [running, queued] = res.body.jobs as { job_id: string }[];
    await until(async () => (await getJson(`${agent.base}/api/status/${running!.job_id}`)).body.progress > 0.1, 30_000, "the first job to start decoding");
    agent.proc.child.kill("SIGTERM");
    expect(await agent.proc.exited).toBe(0);
    expect(agent.proc.lines.some((l) => /interrupted by shutdown; it resumes at the next start/.test(l))).toBe(true);

    agent = await spawnTranscription(dataDir, ["--asr-jobs", "1"]);
    procs.push(agent.proc);
    for (const job of [running!, queued!]) expect((await waitForJob(agent.base, job.job_id, 120_000)).view.status).toBe("completed");
  }, 240_000);
});

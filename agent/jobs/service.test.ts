/**
 * The job service's error path when the store itself fails: a real Transcriber (ffmpeg refuses a
 * file that is not audio) and a real SQLite store that refuses writes.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { Logger } from "../../core/log.js";
import { makeMedia, TEST_VAD, TEST_WHISPER_DIR } from "../../test/helpers/speech.js";
import { Transcriber, WhisperPool } from "../asr/index.js";
import { JobService } from "./service.js";
import { JobStore } from "./store.js";

/** A job service's options on a fresh data folder, a real whisper pool and transcriber, logging nothing. */
function quietService() {
  const logger = pino({ level: "silent" }) as unknown as Logger;
  const dataDir = mkdtempSync(join(tmpdir(), "kiln-jobs-"));
  const whisper = new WhisperPool({ dir: TEST_WHISPER_DIR, compute: "cpu", memoryBudgetMb: 256, parallel: 1, threads: 1, logger });
  const transcriber = new Transcriber({ whisper, vad: { model: TEST_VAD }, maxAudioSeconds: 3600, logger });
  return { whisper, options: { dataDir, transcriber, concurrency: 1, maxQueued: 4, uploadBudgetBytes: 10 * 1024 ** 2, resultTtlSeconds: 3600, maxResults: 10, logger } };
}

/** Submits `seconds` of tone bursts as one job (no temperature fallback: the random-weight whisper would trip it); returns its id. */
async function submitTalk(jobs: JobService, seconds: number): Promise<string> {
  const staged = await jobs.stage("talk.wav", await jobs.admit());
  copyFileSync(makeMedia(mkdtempSync(join(tmpdir(), "kiln-media-")), "talk.wav", { seconds }), staged.path);
  const [job] = jobs.submit([staged], { model: "base", translate: false, speakerDiarization: false, decoding: { temperatureIncrement: 0 } });
  return job!.job_id;
}

describe("JobService", () => {
  it("logs, with the job id, a failure to record a job's outcome; nothing becomes an unhandled rejection", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) }) as unknown as Logger;
    const dataDir = mkdtempSync(join(tmpdir(), "kiln-jobs-"));
    const whisper = new WhisperPool({ dir: TEST_WHISPER_DIR, compute: "cpu", memoryBudgetMb: 256, parallel: 1, threads: 1, logger });
    const transcriber = new Transcriber({ whisper, vad: { model: TEST_VAD }, maxAudioSeconds: 3600, logger });
    const jobs = new JobService({ dataDir, transcriber, concurrency: 1, maxQueued: 4, uploadBudgetBytes: 1024 ** 2, resultTtlSeconds: 3600, maxResults: 10, logger });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const ticket = await jobs.admit();
      const staged = await jobs.stage("notes.mp3", ticket);
      writeFileSync(staged.path, "not audio at all\n".repeat(100));
      await jobs.charge(staged, 1700);
      jobs.settle(ticket);
      const [job] = jobs.submit([staged], { model: "base", translate: false, speakerDiarization: false });
      // From now on (the job has started, and awaits ffmpeg) the store refuses every write, as a full disk would.
      (jobs as unknown as { store: { db: { pragma(s: string): unknown } } }).store.db.pragma("query_only = ON");
      await expect.poll(() => lines.some((l) => l.msg === "transcription job ended but its outcome could not be recorded"), { timeout: 20_000 }).toBe(true);
      const line = lines.find((l) => l.msg === "transcription job ended but its outcome could not be recorded")!;
      expect(line).toMatchObject({ level: 50, job: job!.job_id });
      expect((line.err as { message: string }).message).toMatch(/readonly|read-only/i);
      expect(line.failure).toMatch(/^notes\.mp3 is not an audio or video file/);
      expect(jobs.counts()).toEqual({ running: 0, queued: 0 });
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      await jobs.close();
      await whisper.dispose();
    }
  });

  it("a job resumed at start holds its upload's bytes in the staging budget until it ends", async () => {
    const { whisper, options } = quietService();
    // A job left in `processing` by a previous run (its service closed before it could start).
    const before = new JobService({ ...options, concurrency: 0 });
    const staged = await before.stage("kept.mp3", await before.admit());
    writeFileSync(staged.path, "not audio at all\n".repeat(100));
    const [job] = before.submit([staged], { model: "base", translate: false, speakerDiarization: false });
    await before.close();
    const jobs = new JobService(options);
    try {
      await jobs.recover();
      expect(jobs.budget.usedBytes).toBe(1700);
      await expect.poll(() => jobs.view(job!.job_id)?.status, { timeout: 20_000 }).toBe("error");
      expect(jobs.budget.usedBytes).toBe(0);
    } finally {
      await jobs.close();
      await whisper.dispose();
    }
  });
});

describe("JobService.watch", () => {
  it("a watcher that reconnects after a restart with the last segment it had gets each later segment once, none it had (the resumed run tells its kept ones again)", async () => {
    const { whisper, options } = quietService();
    const before = new JobService(options);
    const id = await submitTalk(before, 150);
    await expect.poll(() => before.view(id)?.segments.length ?? 0, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    const had = before.view(id)!.segments.at(-1)!.id; // what the client had when the agent stopped
    await before.close(); // a drain: the job stays, its finished chunks kept
    const jobs = new JobService(options);
    try {
      await jobs.recover();
      const heard: number[] = [];
      let done = false;
      await jobs.watch(
        id,
        (event) => {
          if (event.type === "segment") heard.push(event.segment.id);
          if (event.type === "done") done = true;
        },
        had,
      );
      await expect.poll(() => done, { timeout: 30_000 }).toBe(true);
      expect(jobs.view(id)?.status).toBe("completed");
      expect(heard.length).toBeGreaterThan(0);
      expect(Math.min(...heard)).toBe(had + 1);
      expect(new Set(heard).size).toBe(heard.length);
    } finally {
      await jobs.close();
      await whisper.dispose();
    }
  });
});

describe("JobService.cancel", () => {
  it("a cancel that races a drain stays cancelled: the job does not come back at the next start", async () => {
    const { whisper, options } = quietService();
    const first = new JobService(options);
    const id = await submitTalk(first, 150);
    await expect.poll(() => first.view(id)?.phase, { timeout: 30_000 }).toBe("transcribing");
    const cancelled = first.cancel(id).catch(() => undefined); // its answer may find the store closed by the drain
    await first.close();
    await cancelled;
    const next = new JobService(options);
    try {
      await next.recover();
      expect(next.view(id)?.status).toBe("cancelled");
      expect(next.counts()).toEqual({ running: 0, queued: 0 });
    } finally {
      await next.close();
      await whisper.dispose();
    }
  });
});

describe("JobService.recover", () => {
  it("a job that waits in the queue through restarts keeps every attempt: only runs the agent died in count", async () => {
    const { whisper, options } = quietService();
    const first = new JobService({ ...options, concurrency: 0 }); // a busy agent: the job only waits
    const id = await submitTalk(first, 4);
    await first.close();
    for (let restart = 0; restart < 4; restart++) {
      const waiting = new JobService({ ...options, concurrency: 0 });
      await waiting.recover();
      expect(waiting.view(id)).toMatchObject({ status: "processing", phase: "queued" });
      await waiting.close();
    }
    const jobs = new JobService(options);
    try {
      await jobs.recover();
      await expect.poll(() => jobs.view(id)?.status, { timeout: 30_000 }).toBe("completed");
    } finally {
      await jobs.close();
      await whisper.dispose();
    }
  });

  it("gives up a job after three runs in a row that the agent died in without a finished step, removing its files; two are resumed", async () => {
    const { whisper, options } = quietService();
    const store = new JobStore(join(options.dataDir, "jobs.db"));
    const seed = (id: string, runs: number) => {
      mkdirSync(join(options.dataDir, "uploads", id), { recursive: true });
      mkdirSync(join(options.dataDir, "work", id), { recursive: true });
      writeFileSync(join(options.dataDir, "uploads", id, "input"), "bytes");
      store.insert({
        id,
        fileName: `${id}.wav`,
        inputPath: join(options.dataDir, "uploads", id, "input"),
        options: { model: "base", translate: false, speakerDiarization: false },
        eta: 0,
        handleHash: "x",
      });
      for (let i = 0; i < runs; i++) store.begun(id); // each run began, and the agent died before it finished a step
    };
    seed("poison", 3);
    seed("unlucky", 2);
    store.close();
    const jobs = new JobService({ ...options, concurrency: 0 });
    try {
      await jobs.recover();
      expect(jobs.view("poison")).toMatchObject({ status: "error", error: expect.stringMatching(/^engine fault: the agent stopped 3 times in a row/) });
      expect(existsSync(join(options.dataDir, "uploads", "poison"))).toBe(false);
      expect(existsSync(join(options.dataDir, "work", "poison"))).toBe(false);
      expect(jobs.view("unlucky")).toMatchObject({ status: "processing", phase: "queued" });
      expect(existsSync(join(options.dataDir, "work", "unlucky"))).toBe(true); // its kept steps wait for its run
    } finally {
      await jobs.close();
      await whisper.dispose();
    }
  });

  it("ends a fleet job the agent was running when it stopped (no one waits for it) and removes its upload and work folder", async () => {
    const logger = pino({ level: "silent" }) as unknown as Logger;
    const dataDir = mkdtempSync(join(tmpdir(), "kiln-jobs-"));
    const input = join(dataDir, "uploads", "fleet-job", "input");
    mkdirSync(join(dataDir, "uploads", "fleet-job"), { recursive: true });
    writeFileSync(input, "bytes of a tenant's upload");
    mkdirSync(join(dataDir, "work", "fleet-job"), { recursive: true });
    writeFileSync(join(dataDir, "work", "fleet-job", "audio.f32"), "its decoded audio");
    const store = new JobStore(join(dataDir, "jobs.db"));
    store.insert({
      id: "fleet-job",
      fileName: "a.mp3",
      inputPath: input,
      options: { model: "base", translate: false, speakerDiarization: false, fleet: true },
      eta: 0,
      handleHash: "x",
    });
    store.close();
    const whisper = new WhisperPool({ dir: TEST_WHISPER_DIR, compute: "cpu", memoryBudgetMb: 256, parallel: 1, threads: 1, logger });
    const transcriber = new Transcriber({ whisper, vad: { model: TEST_VAD }, maxAudioSeconds: 3600, logger });
    const jobs = new JobService({ dataDir, transcriber, concurrency: 1, maxQueued: 4, uploadBudgetBytes: 1024 ** 2, resultTtlSeconds: 3600, maxResults: 10, logger });
    try {
      await jobs.recover();
      expect(jobs.view("fleet-job")).toMatchObject({ status: "error", error: expect.stringMatching(/fleet job/) });
      expect(existsSync(input)).toBe(false);
      expect(existsSync(join(dataDir, "work", "fleet-job"))).toBe(false);
      expect(jobs.counts()).toEqual({ running: 0, queued: 0 });
    } finally {
      await jobs.close();
      await whisper.dispose();
    }
  });
});

/** Native tasks in child processes (engine/task.ts), through the real VAD on the fabricated energy-VAD model. */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { TEST_VAD } from "../../../test/helpers/speech.js";
import { EngineError, JobAbortedError } from "../errors.js";
import { detectSpeech } from "../vad/index.js";

const dir = mkdtempSync(join(tmpdir(), "kiln-task-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** A 16 kHz f32le PCM file of `seconds`: a 440 Hz tone for the first half, silence after. */
function pcmFile(seconds: number): string {
  const samples = new Float32Array(seconds * 16_000);
  for (let i = 0; i < samples.length / 2; i++) samples[i] = 0.4 * Math.sin((2 * Math.PI * 440 * i) / 16_000);
  const path = join(dir, `audio-${files++}.f32`);
  writeFileSync(path, new Uint8Array(samples.buffer));
  return path;
}

/** The pids of this process's children running `module`. */
function childrenRunning(module: string): number[] {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        const ppid = Number(/^\d+ \(.*\) \S+ (\d+)/.exec(readFileSync(`/proc/${d}/stat`, "utf8"))?.[1]);
        return ppid === process.pid && readFileSync(`/proc/${d}/cmdline`, "utf8").includes(module) ? [Number(d)] : [];
      } catch {
        return []; // ended meanwhile
      }
    });
}

const gone = (pid: number) => {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
};

describe("runTask", () => {
  it("fails a task whose process is killed with the crash in an EngineError, and runs the next one", async () => {
    const long = pcmFile(600);
    let pid: number | undefined;
    // Killed after its first block of 10 s: 590 s remain, far longer than the kill takes.
    const crashed = detectSpeech(long, { model: TEST_VAD }, () => {
      if (pid !== undefined) return;
      [pid] = childrenRunning("vad/worker.js");
      process.kill(pid!, "SIGKILL");
    });
    await expect(crashed).rejects.toThrow(EngineError);
    await expect(crashed).rejects.toThrow("voice-activity detection crashed (SIGKILL)");
    expect(gone(pid!)).toBe(true);
    const spans = await detectSpeech(pcmFile(4), { model: TEST_VAD });
    expect(spans.length).toBeGreaterThan(0);
    await vi.waitFor(() => expect(childrenRunning("vad/worker.js")).toEqual([]), { timeout: 10_000, interval: 50 });
  });

  it("kills the task's process when the signal aborts", async () => {
    const abort = new AbortController();
    let pid: number | undefined;
    const aborted = detectSpeech(
      pcmFile(600),
      { model: TEST_VAD },
      () => {
        if (pid !== undefined) return;
        [pid] = childrenRunning("vad/worker.js");
        abort.abort();
      },
      abort.signal,
    );
    await expect(aborted).rejects.toThrow(JobAbortedError);
    await vi.waitFor(() => expect(gone(pid!)).toBe(true), { timeout: 10_000, interval: 50 });
  });
});

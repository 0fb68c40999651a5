/**
 * With KILN_TEST_DATA: the real Silero VAD on real speech. jfk.wav and jfk.mp3 run end to end
 * (through the fabricated whisper: the words are noise, the pipeline is real), and the
 * voice-activity chunks of en-60s.wav cover its speech and skip its pauses.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planChunks } from "../agent/asr/chunks.js";
import { decodeToPcm } from "../agent/asr/ffmpeg.js";
import { detectSpeech } from "../agent/asr/index.js";
import { tempDir } from "./helpers/fleet.js";
import { startTranscription, upload, waitForJob, type Transcription } from "./helpers/speech.js";

const DATA = process.env.KILN_TEST_DATA;
const SILERO = DATA ? join(DATA, "models", "silero_vad.onnx") : "";
const audio = (name: string) => join(DATA ?? "", "audio", name);
const realData = Boolean(DATA) && existsSync(SILERO) && existsSync(audio("jfk.wav"));

describe.skipIf(!realData)("with KILN_TEST_DATA (silero_vad.onnx, jfk, en-60s)", () => {
  let t: Transcription;
  beforeAll(async () => {
    t = await startTranscription({ vadModel: SILERO });
  });
  afterAll(() => t?.agent.close());

  it("runs jfk.wav and jfk.mp3 end to end", async () => {
    const res = await upload(t.base, [audio("jfk.wav"), audio("jfk.mp3")], { language: "en" });
    expect(res.status).toBe(202);
    for (const job of res.body.jobs as { job_id: string }[]) {
      const { view } = await waitForJob(t.base, job.job_id);
      expect(view.status, view.error).toBe("completed");
      expect(view.result.language).toBe("en");
      expect(view.result.duration).toBeCloseTo(11, 0);
      expect(view.result.segments.length).toBeGreaterThan(0);
      for (const s of view.result.segments) {
        expect(s.start).toBeGreaterThanOrEqual(0);
        expect(s.end).toBeLessThanOrEqual(view.result.duration + 0.01);
      }
    }
  });

  it("cuts en-60s.wav into chunks that cover its speech and skip its pauses", async () => {
    const dir = tempDir();
    const pcm = join(dir, "audio.f32");
    const samples = await decodeToPcm(audio("en-60s.wav"), pcm, { maxSeconds: 3600, displayName: "en-60s.wav" });
    const spans = await detectSpeech(pcm, { model: SILERO });
    const chunks = planChunks(spans, samples);
    const seconds = (n: number) => n / 16_000;
    const pieces = chunks.flatMap((c) => c.pieces);
    // Every speech span lies inside some piece.
    for (const s of spans) expect(pieces.some((p) => p.start <= s.start && p.end >= s.end)).toBe(true);
    // Chunks respect whisper's window; the pauses between spans are not sent to whisper.
    for (const c of chunks) expect(seconds(c.samples)).toBeLessThanOrEqual(30);
    const covered = seconds(pieces.reduce((a, p) => a + p.end - p.start, 0));
    expect(covered).toBeLessThan(seconds(samples) - 3);
    expect(covered).toBeGreaterThan(40);
    const gaps = spans
      .slice(1)
      .map((s, i) => ({ start: spans[i]!.end, end: s.start }))
      .filter((g) => seconds(g.end - g.start) > 1);
    expect(gaps.length).toBeGreaterThan(0);
    for (const g of gaps) {
      const mid = (g.start + g.end) / 2;
      expect(pieces.some((p) => p.start <= mid && p.end > mid)).toBe(false);
    }
  });
});
if (!realData)
  describe.skip("with KILN_TEST_DATA (skipped: KILN_TEST_DATA is not set or lacks silero_vad.onnx / jfk.wav)", () => {
    it("real speech suite", () => undefined);
  });

/**
 * Speaker diarization (sherpa-onnx, fabricated pyannote-shaped segmentation and wespeaker-shaped
 * embedding models) and translation through the node's chat model (the tiny test GGUF: the words
 * are noise, the path, timings and shapes are real).
 */
import { existsSync, readdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { speechModelFor } from "../models/speech.js";
import { MODEL_ID, TINY_MODEL, tempDir } from "./helpers/fleet.js";
import {
  fetchJob,
  getJson,
  makeMedia,
  startTranscription,
  TEST_EMBEDDING,
  TEST_SEGMENTATION,
  TEST_WHISPER_DIR,
  twoVoices,
  upload,
  waitForJob,
  type Transcription,
} from "./helpers/speech.js";

let t: Transcription;
let plain: Transcription;
let media: string;
let voices: string;

beforeAll(async () => {
  t = await startTranscription({
    segmentationModel: TEST_SEGMENTATION,
    embeddingModel: TEST_EMBEDDING,
    serve: `${MODEL_ID}=${TINY_MODEL}`,
    threads: "1",
    contextSize: "2048",
  } as Record<string, string>);
  plain = await startTranscription();
  media = tempDir();
  voices = makeMedia(media, "voices.wav", { seconds: 24, source: twoVoices(24) });
});
afterAll(async () => {
  await t?.agent.close();
  await plain?.agent.close();
});

/**
 * No temperature fallback: the fabricated model's noise fails every fallback test, so with it each
 * window of these voices is decoded six times over (5–10 s a job). These tests are about speakers and
 * translation, not decoding.
 */
const ONCE = { temperature_increment: "0" };

interface Turn {
  speaker: string;
  start: number;
  end: number;
  text: string;
}

function checkSpeakers(result: any): Set<string> {
  const turns = result.transcript_with_speakers as Turn[];
  expect(turns.length).toBeGreaterThan(0);
  let end = 0;
  for (const turn of turns) {
    expect(turn.start).toBeGreaterThanOrEqual(end - 1e-9);
    expect(turn.end).toBeGreaterThanOrEqual(turn.start);
    end = turn.end;
  }
  const order: string[] = [];
  for (const s of result.segments) {
    expect(s.speaker).toMatch(/^SPEAKER_\d\d$/);
    for (const w of s.words) {
      expect(w.speaker).toBe(s.speaker);
      if (!order.includes(w.speaker)) order.push(w.speaker);
    }
  }
  // Stable labels: numbered in order of first appearance.
  expect(order).toEqual(order.map((_, i) => `SPEAKER_${String(i).padStart(2, "0")}`));
  return new Set(turns.map((x) => x.speaker));
}

describe("speaker diarization", () => {
  it("labels every word, orders turns without overlap, and gives exactly min = max speakers", async () => {
    const res = await upload(t.base, [voices], { ...ONCE, speaker_diarization: "true", min_speakers: "2", max_speakers: "2" });
    expect(res.status).toBe(202);
    const { view } = await waitForJob(t.base, res.body.job_id);
    expect(view.status, view.error).toBe("completed");
    expect(checkSpeakers(view.result).size).toBe(2);
    const srt = await (await fetchJob(`${t.base}/api/result/${res.body.job_id}?format=srt`)).text();
    expect(srt).toMatch(/SPEAKER_00: /);
    const txt = await (await fetchJob(`${t.base}/api/result/${res.body.job_id}?format=txt`)).text();
    expect(txt).toMatch(/^\[SPEAKER_00\] /);
  });

  it("keeps the count within max_speakers", async () => {
    const res = await upload(t.base, [voices], { ...ONCE, speaker_diarization: "true", max_speakers: "1" });
    const { view } = await waitForJob(t.base, res.body.job_id);
    expect(view.status, view.error).toBe("completed");
    expect(checkSpeakers(view.result).size).toBe(1);
  });

  it("keeps the event loop free: /api/status answers within 100 ms while a diarization runs", async () => {
    const long = makeMedia(media, "long-voices.wav", { seconds: 40, source: twoVoices(40) });
    const res = await upload(t.base, [long], { ...ONCE, speaker_diarization: "true" });
    const latencies: number[] = [];
    for (;;) {
      const started = performance.now();
      const { body } = await getJson(`${t.base}/api/status/${res.body.job_id}`);
      latencies.push(performance.now() - started);
      if (body.status !== "processing") {
        expect(body.status, body.error).toBe("completed");
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(latencies.length).toBeGreaterThan(5);
    expect(Math.max(...latencies)).toBeLessThan(100);
  }, 120_000);

  it("uses the models `kiln models pull speech:…` puts in the whisper folder when no flag names any", async () => {
    const whisperDir = tempDir();
    for (const name of readdirSync(TEST_WHISPER_DIR)) symlinkSync(join(TEST_WHISPER_DIR, name), join(whisperDir, name));
    symlinkSync(TEST_SEGMENTATION, join(whisperDir, speechModelFor("segmentation").file));
    symlinkSync(TEST_EMBEDDING, join(whisperDir, speechModelFor("embedding").file));
    const pulled = await startTranscription({ whisperDir });
    try {
      const res = await upload(pulled.base, [voices], { ...ONCE, speaker_diarization: "true", max_speakers: "2" });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      const { view } = await waitForJob(pulled.base, res.body.job_id);
      expect(view.status, view.error).toBe("completed");
      expect(checkSpeakers(view.result).size).toBeGreaterThanOrEqual(1);
    } finally {
      await pulled.agent.close();
    }
  });

  it("is refused at submission (400) on a node without diarization models", async () => {
    const res = await upload(plain.base, [voices], { speaker_diarization: "true" });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "diarization_unavailable" });
    expect(res.body.error.message).toMatch(/^speaker_diarization:/);
  });
});

describe("translation to another language", () => {
  it("transcribes, then translates segment by segment through the chat model, keeping timings and the original text", async () => {
    const res = await upload(t.base, [voices], { ...ONCE, translate: "true", target_language: "de", source_language: "en" });
    expect(res.status).toBe(202);
    const { view } = await waitForJob(t.base, res.body.job_id);
    expect(view.status, view.error).toBe("completed");
    const r = view.result;
    expect(r).toMatchObject({ translated_to: "de", language: "en", task: "transcribe", original_text: expect.any(String) });
    expect(r.segments.length).toBeGreaterThan(0);
    for (const s of r.segments) {
      expect(typeof s.original_text).toBe("string");
      expect(typeof s.text).toBe("string");
      // The chat model's output, not the words as spoken copied over.
      if (s.original_text.trim()) expect(s.text, s.original_text).not.toBe(s.original_text);
      for (const w of s.words) {
        expect(w.start).toBeGreaterThanOrEqual(s.start);
        expect(w.end).toBeLessThanOrEqual(s.end);
      }
    }
    expect(r.original_text).toBe(r.segments.map((s: { original_text: string }) => s.original_text).join(" "));
    expect(r.segments.some((s: { original_text: string }) => s.original_text.trim())).toBe(true);
    expect(r.text).not.toBe(r.original_text);
  });

  it("is refused at submission (400) on a node without a chat model, and an unknown target is a 400", async () => {
    const res = await upload(plain.base, [voices], { translate: "true", target_language: "de" });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "translation_unavailable" });
    expect(res.body.error.message).toMatch(/^target_language:/);
    const bad = await upload(t.base, [voices], { translate: "true", target_language: "zz" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_language");
  });
});

const DATA = process.env.KILN_TEST_DATA;
const SEGMENTATION = DATA ? join(DATA, "models", "pyannote-segmentation-3.0.int8.onnx") : "";
const realData = Boolean(DATA) && existsSync(SEGMENTATION);
describe.skipIf(!realData)("with KILN_TEST_DATA (pyannote-segmentation-3.0, two-speakers.wav)", () => {
  it("diarizes two-speakers.wav with the real segmentation and the fabricated embedding model into 1–2 speakers", async () => {
    const real = await startTranscription({ segmentationModel: SEGMENTATION, embeddingModel: TEST_EMBEDDING });
    try {
      const res = await upload(real.base, [join(DATA!, "audio", "two-speakers.wav")], { speaker_diarization: "true", max_speakers: "2" });
      const { view } = await waitForJob(real.base, res.body.job_id);
      expect(view.status, view.error).toBe("completed");
      const speakers = checkSpeakers(view.result).size;
      expect(speakers).toBeGreaterThanOrEqual(1);
      expect(speakers).toBeLessThanOrEqual(2);
    } finally {
      await real.agent.close();
    }
  });
});
if (!realData)
  describe.skip("with KILN_TEST_DATA (skipped: KILN_TEST_DATA is not set or lacks the pyannote segmentation model)", () => {
    it("two-speakers suite", () => undefined);
  });

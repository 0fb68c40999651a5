/**
 * A resumable run on a real Transcriber (the fabricated whisper and energy VAD): it takes up what an
 * earlier run kept in its work folder, and only what still fits the chunks it plans now.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import type { Logger } from "../../core/log.js";
import { makeMedia, TEST_VAD, TEST_WHISPER_DIR } from "../../test/helpers/speech.js";
import { tempDir } from "../../test/helpers/temp.js";
import { AudioError, EngineError, Transcriber, WhisperPool, type TranscribeRequest } from "./index.js";

const logger = pino({ level: "silent" }) as unknown as Logger;
const whisper = new WhisperPool({ dir: TEST_WHISPER_DIR, compute: "cpu", memoryBudgetMb: 256, parallel: 1, threads: 1, logger });
const transcriber = new Transcriber({ whisper, vad: { model: TEST_VAD }, maxAudioSeconds: 3600, logger });
afterAll(() => whisper.dispose());

/** Runs the transcription of `request`, returning how many chunks whisper decoded for it and the segments it told. */
async function decodedBy(request: TranscribeRequest): Promise<{ chunks: number; told: number[] }> {
  const before = whisper.chunksDecoded;
  const told: number[] = [];
  await transcriber.run(
    request,
    () => undefined,
    undefined,
    (segments) => told.push(...segments.map((s) => s.id)),
  );
  return { chunks: whisper.chunksDecoded - before, told };
}

describe("Transcriber, resumable", () => {
  it("decodes only the chunks the kept ones do not cover, and drops kept chunks that no longer fit the plan", async () => {
    const workDir = tempDir();
    const request: TranscribeRequest = {
      input: makeMedia(tempDir(), "talk.wav", { seconds: 100 }),
      displayName: "talk.wav",
      workDir,
      resumable: true,
      model: "base",
      translate: false,
      decoding: { temperatureIncrement: 0 },
    };
    const first = await decodedBy(request);
    expect(first.chunks).toBeGreaterThanOrEqual(3);
    const log = join(workDir, "chunks.jsonl");
    const records = readFileSync(log, "utf8").split("\n").filter(Boolean);
    expect(records).toHaveLength(first.chunks);

    // As if the run had died after its first two chunks: the transcript and the rest were never written.
    rmSync(join(workDir, "transcript.json"));
    writeFileSync(
      log,
      records
        .slice(0, 2)
        .map((r) => `\n${r}`)
        .join(""),
    );
    const resumed = await decodedBy(request);
    expect(resumed.chunks).toBe(first.chunks - 2);
    expect(resumed.told).toEqual(first.told); // the kept chunks' segments are told again, in order, once

    // Kept chunks from a run that planned otherwise (an upgrade that chunks differently) are decoded again.
    rmSync(join(workDir, "transcript.json"));
    const moved = records.slice(0, 2).map((r) => JSON.stringify({ ...JSON.parse(r), start: JSON.parse(r).start + 1600 }));
    writeFileSync(log, moved.map((r) => `\n${r}`).join(""));
    expect((await decodedBy(request)).chunks).toBe(first.chunks);
  });
});

describe("Transcriber, on a node whose ffmpeg failed the start check", () => {
  it("fails a run that must decode as an engine fault naming ffmpeg, never as the file's", async () => {
    const refusing = new Transcriber({ whisper, vad: { model: TEST_VAD }, maxAudioSeconds: 3600, logger, ffmpegFault: "ffmpeg failed (Option not found)" });
    const request: TranscribeRequest = { input: makeMedia(tempDir(), "talk.wav", { seconds: 2 }), displayName: "talk.wav", workDir: tempDir(), model: "base", translate: false };
    const failure = await refusing.run(request, () => undefined).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(EngineError);
    expect(failure).not.toBeInstanceOf(AudioError);
    expect((failure as Error).message).toBe("ffmpeg cannot decode on this node (ffmpeg failed (Option not found)); the file may be fine");
  });
});

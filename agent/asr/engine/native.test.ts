/**
 * Kiln's whisper addon itself (native/whisper/addon.cc) on the fabricated tiny model: what it
 * returns, what it refuses, and that the installed builds are the current sources'. Loaded in this
 * test's own worker process (the agent loads it only in engine processes).
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TEST_WHISPER_DIR } from "../../../test/helpers/speech.js";
import { installedWhisperAddon, PREBUILT_KINDS, prebuiltBinsDir } from "../../../core/prebuilt.js";
import { sha256Tree } from "../../../scripts/lib/hash.js";
import { loadWhisperAddon } from "./native.js";

/** One second of 440 Hz tone, one of silence, alternating. */
const bursts = (seconds: number) => Float32Array.from({ length: seconds * 16_000 }, (_, i) => (Math.floor(i / 16_000) % 2 ? 0 : 0.4 * Math.sin((2 * Math.PI * 440 * i) / 16_000)));
const MODEL = join(TEST_WHISPER_DIR, "ggml-base.bin");

describe("the whisper addon", () => {
  const { addon, devices } = loadWhisperAddon("cpu");

  it("registers the CPU folder's backends and reports whisper.cpp's version", () => {
    expect(addon.version).toBe("1.9.3");
    expect(devices.map((d) => d.type)).toContain("cpu");
    expect(devices.some((d) => d.type === "gpu")).toBe(false); // no GPU here
  });

  it("decodes with timed tokens, streams every segment before resolving, and gives the same text each time", async () => {
    const model = await addon.loadModel(MODEL, { gpu: false });
    try {
      const params = { threads: 2, language: "en", tokenTimestamps: true, noContext: true, suppressNonSpeech: true, temperatureInc: 0 };
      const streamed: unknown[] = [];
      const segments = await addon.transcribe(model, bursts(8), params, (s) => streamed.push(s));
      expect(segments.length).toBeGreaterThan(0);
      expect(streamed).toEqual(segments);
      for (const seg of segments) {
        expect(seg.lang).toBe("en");
        expect(seg.to).toBeGreaterThan(seg.from);
        expect(seg.tokens.map((t) => t.text).join("")).toContain(seg.text.trim());
        for (const t of seg.tokens) {
          expect(t.p).toBeGreaterThanOrEqual(0);
          expect(t.p).toBeLessThanOrEqual(1);
          // whisper.cpp's own token times (not always ordered on a random model), in ms on the window
          expect([t.from, t.to].every((ms) => Number.isInteger(ms) && ms! >= 0 && ms! <= 30_000)).toBe(true);
        }
      }
      const again = await addon.transcribe(model, bursts(8), params);
      expect(again.map((s) => s.text)).toEqual(segments.map((s) => s.text));
      const untimed = await addon.transcribe(model, bursts(8), { ...params, tokenTimestamps: false });
      expect(untimed[0]!.tokens[0]).not.toHaveProperty("from");
    } finally {
      await model.free();
    }
  }, 60_000);

  it("refuses bad arguments naming them, a free while decoding, and a freed model", async () => {
    const model = await addon.loadModel(MODEL, { gpu: false });
    await expect(async () => addon.transcribe(model, bursts(1), { threads: "2" as unknown as number })).rejects.toThrow("params.threads must be a number");
    await expect(async () => addon.transcribe(model, bursts(1), { threads: 0 })).rejects.toThrow("params.threads must be at least 1");
    // whisper.cpp adds the step in single precision until 1: a tiny one never got there, and its list of temperatures grew without end
    for (const temperatureInc of [1e-8, 0.01, -0.2, Number.NaN, 2]) {
      await expect(async () => addon.transcribe(model, bursts(1), { temperatureInc })).rejects.toThrow("params.temperatureInc must be 0 or from 0.05 to 1");
    }
    await expect(async () => addon.transcribe(model, bursts(1), { temperature: Number.POSITIVE_INFINITY })).rejects.toThrow("params.temperature must be from 0 to 1");
    await expect(async () => addon.transcribe(model, bursts(1), { translate: 1 as unknown as boolean })).rejects.toThrow("params.translate must be a boolean");
    await expect(async () => addon.transcribe(model, new Float64Array(16) as unknown as Float32Array, {})).rejects.toThrow("pcm must be a Float32Array");
    const running = addon.transcribe(model, bursts(2), { threads: 1, temperatureInc: 0 });
    await expect(async () => model.free()).rejects.toThrow("in use by a running transcription");
    await running;
    await model.free();
    expect(model.freed).toBe(true);
    await model.free(); // twice is harmless
    await expect(async () => addon.transcribe(model, bursts(1), {})).rejects.toThrow("the model has been freed");
  }, 60_000);

  it("refuses a language whisper.cpp does not know instead of decoding it as language -1 (which crashed the process)", async () => {
    const model = await addon.loadModel(MODEL, { gpu: false });
    try {
      for (const language of ["constructor", "klingon", ""]) {
        await expect(async () => addon.transcribe(model, bursts(1), { threads: 1, temperatureInc: 0, language })).rejects.toThrow(
          `params.language: "${language}" is not a language whisper knows`,
        );
      }
      expect(Array.isArray(await addon.transcribe(model, bursts(1), { threads: 1, temperatureInc: 0, language: "auto" }))).toBe(true);
    } finally {
      await model.free();
    }
  }, 60_000);

  it("fails a load of a file that is not a whisper model with a rejected promise", async () => {
    await expect(addon.loadModel(join(TEST_WHISPER_DIR, "..", "energy-vad.onnx"), { gpu: false })).rejects.toThrow(/could not load the model/);
  });

  it("refuses a second prebuilt folder in the same process (their libraries share names)", () => {
    expect(() => loadWhisperAddon("cuda")).toThrow("already loaded the cpu whisper addon");
  });
});

describe("the installed whisper addons", () => {
  it("are built from the current native/whisper sources, for every installed prebuilt folder, linked only to that folder's ggml", () => {
    const sources = sha256Tree(join(import.meta.dirname, "..", "..", "..", "native", "whisper"));
    for (const kind of PREBUILT_KINDS) {
      const dir = prebuiltBinsDir(kind);
      if (!dir) continue;
      const installed = installedWhisperAddon(kind);
      expect(installed?.stamp.sources, `${kind}: run npm run build:whisper`).toBe(sources);
      const elf = execFileSync("readelf", ["-d", installed!.file], { encoding: "utf8" });
      const needed = [...elf.matchAll(/\(NEEDED\)\s+Shared library: \[(.+?)\]/g)].map((m) => m[1]);
      expect(needed.filter((n) => n!.startsWith("libggml")).sort()).toEqual(
        kind === "cpu" ? ["libggml-base.so", "libggml.v0.5.0.so"] : ["libggml-base.so", `libggml.${kind}.v0.5.0.so`],
      );
      expect(needed.some((n) => /whisper|llama/.test(n!))).toBe(false);
      expect(elf).toMatch(/R(UN)?PATH.*\[\$ORIGIN\]/);
    }
  });
});

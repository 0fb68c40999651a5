/** WhisperPool on the real smart-whisper binding with the fabricated tiny model. */
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import { TEST_WHISPER_DIR } from "../../test/helpers/speech.js";
import { WhisperPool } from "./whisper.js";

const tone = (seconds: number) => Float32Array.from({ length: seconds * 16_000 }, (_, i) => 0.4 * Math.sin((2 * Math.PI * 440 * i) / 16_000));

describe("WhisperPool", () => {
  it("loads on first use, keeps models loaded, and unloads the least recently used idle one over the memory budget", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kiln-whisper-"));
    copyFileSync(join(TEST_WHISPER_DIR, "ggml-base.bin"), join(dir, "ggml-base.bin"));
    copyFileSync(join(TEST_WHISPER_DIR, "ggml-base.bin"), join(dir, "ggml-small.bin"));
    // One tiny model takes ~10 MiB of file + 64 MiB per parallel state: room for one, not two.
    const pool = new WhisperPool({ dir, gpu: false, memoryBudgetMb: 120, parallel: 1, threads: 1, logger: createLogger("test", "silent") });
    try {
      const loaded = async () => (await pool.status()).filter((m) => m.loaded).map((m) => m.name);
      expect((await pool.status()).filter((m) => m.installed).map((m) => m.name)).toEqual(["base", "small"]);
      expect(await loaded()).toEqual([]);
      const segments = await pool.decode("base", tone(2), { translate: false, language: "en" });
      expect(Array.isArray(segments)).toBe(true);
      expect(await loaded()).toEqual(["base"]);
      await pool.decode("base", tone(1), { translate: false });
      expect(await loaded()).toEqual(["base"]);
      await pool.decode("small", tone(1), { translate: true });
      expect(await loaded()).toEqual(["small"]);
      await expect(pool.decode("medium", tone(1), { translate: false })).rejects.toThrow(/whisper model "medium" is not installed/);
    } finally {
      await pool.dispose();
    }
  });
});

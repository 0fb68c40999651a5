import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { getLlama } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { tempDir } from "../test/helpers/fleet.js";
import { writeTinyLlama } from "./tiny-llama.js";
import { writeWithVocabulary } from "./index.js";

describe("tiny GGUF fabrication", () => {
  it("is byte-identical for the same options and differs with the seed", async () => {
    const dir = tempDir();
    const hash = (f: string) =>
      createHash("sha256")
        .update(readFileSync(join(dir, f)))
        .digest("hex");
    await writeTinyLlama(join(dir, "a.gguf"), { seed: 7 });
    await writeTinyLlama(join(dir, "b.gguf"), { seed: 7 });
    await writeTinyLlama(join(dir, "c.gguf"), { seed: 8 });
    expect(hash("a.gguf")).toBe(hash("b.gguf"));
    expect(hash("a.gguf")).not.toBe(hash("c.gguf"));
    expect(readFileSync(join(dir, "a.gguf")).subarray(0, 4).toString()).toBe("GGUF");
  });

  it("takes a real tokenizer from llama.cpp's vocab GGUFs: Llama 3's tokens, grouped-query attention, and it generates", async (ctx) => {
    const vocab = join(resolve(".cache"), "llama.cpp-kiln", "models", "ggml-vocab-llama-bpe.gguf");
    if (!existsSync(vocab)) return ctx.skip(`no ${vocab} (npm install's build-llama clones llama.cpp's source there)`);
    const path = join(tempDir(), "small-llama3-vocab.gguf");
    const { parameters } = await writeWithVocabulary(path, vocab, { embedding: 64, layers: 2, heads: 4, kvHeads: 2, feedForward: 128, ropeFreqBase: 500_000 });
    expect(parameters).toBe(2 * 128_256 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64);
    const llama = await getLlama({ gpu: false, build: "never" });
    try {
      const model = await llama.loadModel({ modelPath: path });
      expect(model.tokenize("Hello world")).toEqual([9906, 1917]); // Llama 3's ids
      expect(model.fileInfo.metadata.llama?.attention.head_count_kv).toBe(2);
      const sequence = (await model.createContext({ contextSize: 128 })).getSequence();
      const out: number[] = [];
      for await (const t of sequence.evaluate(model.tokenize("Once upon a time"), { temperature: 0 })) {
        out.push(t);
        if (out.length === 4) break;
      }
      expect(out).toHaveLength(4);
    } finally {
      await llama.dispose();
    }
  }, 60_000);
});

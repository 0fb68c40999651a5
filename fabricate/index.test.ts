import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { getLlama, readGgufFileInfo, type Llama, type LlamaModel } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { tempDir } from "../test/helpers/fleet.js";
import { writeTinyLlama, writeTinyLlamaSplit } from "./tiny-llama.js";
import { TEST_MODELS, writeWithVocabulary } from "./index.js";

/** The first tokens a model generates greedily after "Once upon a time". */
async function greedy(model: LlamaModel, count: number): Promise<number[]> {
  const context = await model.createContext({ contextSize: 128 });
  try {
    const out: number[] = [];
    for await (const t of context.getSequence().evaluate(model.tokenize("Once upon a time"), { temperature: 0 })) {
      out.push(t);
      if (out.length === count) break;
    }
    return out;
  } finally {
    await context.dispose();
  }
}

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

  it("splits a model as llama.cpp's gguf-split does: the tensors shared out, split keys in every part, the rest in the first; llama.cpp loads it from its first part and it generates what the single file does", async () => {
    const dir = tempDir();
    const { options } = TEST_MODELS.tiny;
    await writeTinyLlama(join(dir, "whole.gguf"), options);
    const { paths } = await writeTinyLlamaSplit(join(dir, "split"), 3, options);
    expect(paths).toEqual([1, 2, 3].map((i) => join(dir, `split-0000${i}-of-00003.gguf`)));
    const whole = await readGgufFileInfo(join(dir, "whole.gguf"));
    const parts = await Promise.all(paths.map((p) => readGgufFileInfo(p, { spliceSplitFiles: false })));
    const keys = parts.map((p) => p.metadata as unknown as { split: { no: number; count: number; tensors: { count: number } }; general?: unknown; tokenizer?: unknown });
    expect(keys.map((k) => [k.split.no, k.split.count, k.split.tensors.count])).toEqual([0, 1, 2].map((no) => [no, 3, whole.tensorInfo!.length]));
    expect(keys.map((k) => [k.general !== undefined, k.tokenizer !== undefined])).toEqual([
      [true, true],
      [false, false],
      [false, false],
    ]);
    // every tensor once, in order, each part holding some
    expect(parts.every((p) => p.tensorInfo!.length > 0)).toBe(true);
    expect(parts.flatMap((p) => p.tensorInfo!.map((t) => t.name))).toEqual(whole.tensorInfo!.map((t) => t.name));

    let llama: Llama | undefined;
    try {
      llama = await getLlama({ gpu: false, build: "never" });
      const single = await llama.loadModel({ modelPath: join(dir, "whole.gguf") });
      const split = await llama.loadModel({ modelPath: paths[0]! });
      expect(await greedy(split, 8)).toEqual(await greedy(single, 8));
      // llama.cpp loads a split model from its first part only
      await expect(llama.loadModel({ modelPath: paths[1]! })).rejects.toThrow();
    } finally {
      await llama?.dispose();
    }
  }, 60_000);
});

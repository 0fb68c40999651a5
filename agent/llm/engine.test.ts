/** The chat engine on the real node-llama-cpp binding with the fabricated tiny model. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TINY_MODEL, tempDir } from "../../test/helpers/fleet.js";
import { watchBinding } from "../../test/helpers/binding.js";
import { TEST_MODELS } from "../../fabricate/index.js";
import { writeTinyLlamaSplit } from "../../fabricate/tiny-llama.js";
import { ContextLengthExceededError, GenerationAbortedError, LlmEngine, ModelLoadError, ModelNotServedError } from "./index.js";

let engine: LlmEngine;

beforeAll(async () => {
  engine = await LlmEngine.load({
    models: [
      { id: "famB-v3.1", path: TINY_MODEL },
      { id: "famC-k2", path: TINY_MODEL },
    ],
    sequences: 2,
    contextSize: 512,
    threads: 1,
    gpu: "auto",
    logger: createLogger("test", "silent"),
  });
});
afterAll(() => engine?.dispose());

describe("LlmEngine", () => {
  it("loads a file shared by several ids once; gpu auto falls back to CPU cleanly here", () => {
    expect(engine.modelPools).toHaveLength(1);
    expect(engine.modelPools[0]!.modelIds).toEqual(["famB-v3.1", "famC-k2"]);
    expect(engine.compute).toBe("cpu");
    expect(engine.modelPools[0]!.contextSize).toBeGreaterThanOrEqual(512);
  });

  it("generates for either id, streaming text", async () => {
    let streamed = "";
    const r = await engine.generate("famC-k2", [{ role: "user", content: "hi" }], {
      maxTokens: 10,
      temperature: 0,
      onText: (t) => {
        streamed += t;
      },
    });
    expect(r).toMatchObject({ finishReason: "length", completionTokens: 10 });
    expect(r.text).toBe(streamed);
  });

  it("an aborted signal stops generation and frees the slot", async () => {
    const ac = new AbortController();
    const pending = engine.generate("famB-v3.1", [{ role: "user", content: "go" }], { maxTokens: 400, signal: ac.signal, onText: () => ac.abort() });
    await expect(pending).rejects.toBeInstanceOf(GenerationAbortedError);
    expect(engine.modelPools[0]!.busy).toBe(0);
  });

  it("refuses text that cannot fit the context before tokenizing it, and text that might fit after", async () => {
    const pool = engine.modelPools[0]!;
    // The fabricated vocabulary's longest token is "<|im_start|>".
    expect(pool.maxTokenBytes).toBe(12);
    const bound = pool.contextSize * pool.maxTokenBytes;
    // One character per token here: at the bound it is tokenized, and found to be too many tokens.
    const atBound = engine.generate("famB-v3.1", [
      { role: "system", content: "a".repeat(bound - 1) },
      { role: "user", content: "b" },
    ]);
    await expect(atBound).rejects.toBeInstanceOf(ContextLengthExceededError);
    await expect(atBound).rejects.toMatchObject({
      code: "context_length_exceeded",
      message: expect.stringMatching(/^messages: the prompt is \d+ tokens; this model's context holds 512$/),
    });
    // A byte more (a two-byte character) and it is refused on its length alone: 6 MB would take minutes to tokenize on this vocabulary.
    for (const content of ["a".repeat(bound - 1) + "é", "a".repeat(6_000_000)]) {
      await expect(engine.generate("famB-v3.1", [{ role: "user", content }])).rejects.toMatchObject({
        code: "context_length_exceeded",
        message: `messages: the messages hold ${Buffer.byteLength(content)} bytes of text, more than this model's context of 512 tokens can hold (its longest token is 12 bytes)`,
      });
    }
    expect(pool.busy).toBe(0);
  });

  it.each([
    ["a missing file", () => "/nonexistent/model.gguf", /^famB-v3\.1: cannot load \/nonexistent\/model\.gguf: no such file$/],
    [
      "a text file",
      () => {
        const f = join(tempDir(), "notes.gguf");
        writeFileSync(f, "not a model\n");
        return f;
      },
      /: cannot load .*notes\.gguf: Invalid GGUF magic/,
    ],
    [
      "a bare GGUF magic",
      () => {
        const f = join(tempDir(), "magic.gguf");
        writeFileSync(f, "GGUF");
        return f;
      },
      /: cannot load .*magic\.gguf: not a readable GGUF file/,
    ],
    ["a directory", () => tempDir(), /: cannot load .*: it is a directory$/],
  ])("refuses to load %s with a ModelLoadError naming the id and the path", async (_, path, message) => {
    const load = LlmEngine.load({ models: [{ id: "famB-v3.1", path: path() }], sequences: 1, contextSize: 256, threads: 1, gpu: "cpu", logger: createLogger("test", "silent") });
    await expect(load).rejects.toBeInstanceOf(ModelLoadError);
    await expect(load).rejects.toMatchObject({ code: "model_load_failed", message: expect.stringMatching(message) });
  });

  it("loads a split GGUF from its first part whichever part is named, and generates what the single file does; a missing part is refused naming it", async () => {
    const dir = tempDir();
    const { paths } = await writeTinyLlamaSplit(join(dir, "tiny-split"), 2, TEST_MODELS.tiny.options);
    const options = { sequences: 1, contextSize: 512, threads: 1, gpu: "cpu" as const, logger: createLogger("test", "silent") };
    const split = await LlmEngine.load({
      models: [
        { id: "by-second", path: paths[1]! },
        { id: "by-first", path: paths[0]! },
      ],
      ...options,
    });
    try {
      expect(split.modelPools.map((p) => [p.path, p.modelIds])).toEqual([[paths[0], ["by-second", "by-first"]]]);
      const ask = (e: LlmEngine, id: string) => e.generate(id, [{ role: "user", content: "hi" }], { maxTokens: 10, temperature: 0 });
      expect((await ask(split, "by-second")).text).toBe((await ask(engine, "famB-v3.1")).text);
      expect(split.modelPools[0]!.fingerprint).not.toBe(engine.modelPools[0]!.fingerprint);
    } finally {
      await split.dispose();
    }
    rmSync(paths[1]!);
    const load = LlmEngine.load({ models: [{ id: "famB-v3.1", path: paths[0]! }], ...options });
    await expect(load).rejects.toMatchObject({
      code: "model_load_failed",
      message: `famB-v3.1: cannot load ${paths[0]}: its part ${paths[1]} is missing (llama.cpp loads a split GGUF from its first part, and the other parts from beside it)`,
    });
  });

  it("refuses an id it does not serve", async () => {
    await expect(engine.generate("famA4:70b", [{ role: "user", content: "x" }])).rejects.toBeInstanceOf(ModelNotServedError);
  });
});

describe("LlmEngine under load", () => {
  let busy: LlmEngine;
  beforeAll(async () => {
    busy = await LlmEngine.load({
      models: [{ id: "famB-v3.1", path: TINY_MODEL }],
      sequences: 3,
      contextSize: 2048,
      threads: 1,
      gpu: "cpu",
      logger: createLogger("test", "silent"),
    });
  });
  afterAll(() => busy?.dispose());

  it("starts a request on a slot with an old conversation while two others keep generating (patches/npm: node-llama-cpp's batch loop)", async () => {
    const ask = (text: string, maxTokens: number, onText?: () => void) =>
      busy.generate("famB-v3.1", [{ role: "user", content: text }], { maxTokens, temperature: 0, ...(onText ? { onText } : {}) });
    // every slot holds a conversation, so the next request on any of them must first erase its tokens
    await Promise.all(["one", "two", "three"].map((t) => ask(t, 4)));
    let longDone = 0;
    // long enough (1,500 tokens, ~0.5 s batched) that a loaded machine's stalls cannot outlast them
    const long = [ask("a long story", 1500).then(() => longDone++), ask("another long story", 1500).then(() => longDone++)];
    await new Promise((r) => setTimeout(r, 30));
    let firstText = -1;
    await ask("a short answer", 2, () => {
      if (firstText < 0) firstText = longDone;
    });
    await Promise.all(long);
    // Without the patch, the batch loop held the context lock while either long request had a
    // decode queued, and the short one could only start once both were done.
    expect(firstText).toBe(0);
  });

  it("hands out the free slot with the lowest index, so busy sequences stay consecutive", async () => {
    const pool = busy.modelPools[0]!;
    const taken = [await pool.acquire(), await pool.acquire(), await pool.acquire()];
    expect(taken.map((s) => s.index).sort()).toEqual([0, 1, 2]);
    const byIndex = (i: number) => taken.find((s) => s.index === i)!;
    pool.release(byIndex(0));
    pool.release(byIndex(1));
    const again = await pool.acquire();
    expect(again.index).toBe(0);
    pool.release(again);
    pool.release(byIndex(2));
    expect(pool.busy).toBe(0);
  });

  it("concurrent generations share every batch, in increasing sequence order (patches/npm)", async () => {
    const batches: number[][] = [];
    const unwatch = watchBinding(busy.modelPools[0]!.context, ["initBatch", "addToBatch"], (name, args) => {
      if (name === "initBatch") batches.push([]);
      else batches.at(-1)!.push(args[0] as number);
    });
    try {
      const tokens = 48;
      const results = await Promise.all(
        ["first tale", "second tale", "third tale"].map((text) => busy.generate("famB-v3.1", [{ role: "user", content: text }], { maxTokens: tokens, temperature: 0 })),
      );
      expect(results.map((r) => r.completionTokens)).toEqual([tokens, tokens, tokens]);
      // One batch per generated token plus the prompts. Without the patch, the last sequence to be
      // sampled missed each next batch: about tokens × 3 / 2 batches.
      expect(batches.length).toBeLessThanOrEqual(tokens + 3);
      // Without a unified KV cache, llama.cpp makes one graph only of consecutive, increasing
      // sequence ids; node-llama-cpp's own order was often decreasing (one graph per sequence).
      for (const ids of batches) expect(ids).toEqual([...ids].sort((a, b) => a - b));
      expect(new Set(batches.flat())).toEqual(new Set([0, 1, 2]));
    } finally {
      unwatch();
    }
  });
});

describe("structured output", () => {
  const schema = {
    type: "object",
    properties: {
      answer: { enum: ["yes", "no"] },
      count: { type: "integer" },
      tags: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 3 },
      note: { anyOf: [{ type: "string", maxLength: 12 }, { type: "null" }] },
    },
    additionalProperties: false,
  };

  it("json_object: the reply is one JSON object, ended where the grammar lets the model end it, streamed as returned", async () => {
    // The random test model writes a JSON string until max_tokens; without any token holding a quote,
    // the grammar leaves it an object with no members.
    const model = engine.modelPools[0]!.model;
    const logitBias: Record<string, number> = {};
    for (const token of model.iterateAllTokens()) if (model.detokenize([token], true).includes('"')) logitBias[String(token)] = -100;
    let streamed = "";
    const r = await engine.generate("famB-v3.1", [{ role: "user", content: "Give me JSON" }], {
      maxTokens: 200,
      temperature: 0,
      sampling: { logitBias },
      responseFormat: { type: "json_object" },
      onText: (t) => {
        streamed += t;
      },
    });
    expect(r.finishReason).toBe("stop");
    expect(r.text).toBe(streamed);
    expect(r.text).toBe(r.text.trimEnd());
    const parsed = JSON.parse(r.text) as unknown;
    expect(typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)).toBe(true);
  });

  it("json_schema: sampled replies parse and hold to the schema", async () => {
    for (const seed of [1, 2, 3]) {
      const r = await engine.generate("famB-v3.1", [{ role: "user", content: "Answer" }], {
        maxTokens: 300,
        temperature: 1,
        sampling: { seed },
        responseFormat: { type: "json_schema", schema },
      });
      expect(r.finishReason).toBe("stop");
      const value = JSON.parse(r.text) as Record<string, unknown>;
      expect(Object.keys(value).sort()).toEqual(["answer", "count", "note", "tags"]);
      expect(["yes", "no"]).toContain(value.answer);
      expect(Number.isInteger(value.count)).toBe(true);
      expect((value.tags as string[]).length).toBeLessThanOrEqual(3);
      for (const tag of value.tags as string[]) expect(tag.length).toBeLessThanOrEqual(8);
      expect(value.note === null || (typeof value.note === "string" && value.note.length <= 12)).toBe(true);
    }
  });

  it("refuses a schema keyword the grammar cannot hold, naming its path", async () => {
    const bad = { type: "object", properties: { code: { type: "string", pattern: "^[a-z]+$" } } };
    await expect(engine.generate("famB-v3.1", [{ role: "user", content: "x" }], { maxTokens: 5, responseFormat: { type: "json_schema", schema: bad } })).rejects.toMatchObject({
      code: "invalid_response_format",
      message: expect.stringMatching(/^response_format\.json_schema\.schema\.properties\.code\.pattern: /),
    });
  });
});

describe("embeddings", () => {
  const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0) / Math.sqrt(a.reduce((s, x) => s + x * x, 0) * b.reduce((s, x) => s + x * x, 0));

  it("embeds a batch in order: one vector of the model's size per input, identical inputs identical, tokens counted", async () => {
    const model = engine.modelPools[0]!.model;
    const inputs = ["Once upon a time", "A different text altogether", "Once upon a time"];
    const r = await engine.embed("famB-v3.1", inputs);
    expect(r.vectors).toHaveLength(3);
    for (const v of r.vectors) expect(v).toHaveLength(model.embeddingVectorSize);
    expect(cosine(r.vectors[0]!, r.vectors[2]!)).toBeCloseTo(1, 6);
    expect(cosine(r.vectors[0]!, r.vectors[1]!)).toBeLessThan(0.9999);
    expect(r.promptTokens).toBe(inputs.reduce((n, t) => n + model.tokenize(t).length, 0));
  });

  it("refuses dimensions other than the model's and an input longer than the context, naming the field", async () => {
    const size = engine.modelPools[0]!.model.embeddingVectorSize;
    await expect(engine.embed("famB-v3.1", ["a"], { dimensions: size + 1 })).rejects.toMatchObject({ code: "invalid_dimensions", message: expect.stringMatching(/^dimensions: /) });
    expect((await engine.embed("famB-v3.1", ["a"], { dimensions: size })).vectors).toHaveLength(1);
    await expect(engine.embed("famB-v3.1", ["ok", "word ".repeat(2000)])).rejects.toMatchObject({
      code: "context_length_exceeded",
      message: expect.stringMatching(/^input\[1\]: /),
    });
  });
});

describe("cache scopes", () => {
  it("reuses a slot's cached prompt only within one scope: another account's request starts from nothing", async () => {
    const messages = [{ role: "user" as const, content: "A long enough prompt that a cache would matter here" }];
    const first = await engine.generate("famB-v3.1", messages, { maxTokens: 2, temperature: 0, cacheScope: "alice" });
    expect(first.cachedTokens).toBe(0);
    const again = await engine.generate("famB-v3.1", messages, { maxTokens: 2, temperature: 0, cacheScope: "alice" });
    expect(again.cachedTokens).toBe(again.promptTokens - 1); // all but the last token, evaluated again for its logits
    const stranger = await engine.generate("famB-v3.1", messages, { maxTokens: 2, temperature: 0, cacheScope: "mallory" });
    expect(stranger.cachedTokens).toBe(0);
    expect(stranger.text).toBe(again.text);
  });
});

describe("n choices", () => {
  it("evaluates the prompt once for n choices (the others copy its KV cache), each choice with its own seed and its own text stream", async () => {
    const pool = engine.modelPools[0]!;
    let evaluated = 0;
    const unwatch = watchBinding(pool.context, ["addToBatch"], (_name, args) => {
      evaluated += (args[2] as Uint32Array).length;
    });
    const messages = [{ role: "user" as const, content: "Tell me a story about a fox and a crow, please" }];
    try {
      const streamed = ["", ""];
      const r = await engine.generate("famB-v3.1", messages, {
        n: 2,
        maxTokens: 1,
        temperature: 1.5,
        sampling: { seed: 7 },
        cacheScope: "n-test",
        onText: (t, _l, i) => {
          streamed[i] += t;
        },
      });
      expect(r.choices).toHaveLength(2);
      expect(evaluated).toBeLessThanOrEqual(r.promptTokens + 2); // once, plus each choice's last prompt token (for its logits)
      expect(streamed).toEqual(r.choices.map((c) => c.text));
    } finally {
      unwatch();
    }
    const body = { n: 2, maxTokens: 12, temperature: 1.5, sampling: { seed: 11 }, cacheScope: "n-test" };
    const a = await engine.generate("famB-v3.1", messages, body);
    const b = await engine.generate("famB-v3.1", messages, body);
    expect(a.choices.map((c) => c.text)).toEqual(b.choices.map((c) => c.text)); // seeded: repeatable
    expect(a.choices[0]!.text).not.toBe(a.choices[1]!.text); // each choice its own seed
    expect(a.completionTokens).toBe(a.choices.reduce((n, c) => n + c.completionTokens, 0));
    expect(pool.busy).toBe(0);
  });

  it("refuses more choices than the pool has slots, naming n", async () => {
    await expect(engine.generate("famB-v3.1", [{ role: "user", content: "x" }], { n: 3 })).rejects.toMatchObject({ code: "invalid_n", message: expect.stringMatching(/^n: /) });
  });
});

describe("embedding limits", () => {
  it("refuses an input with no room for the BOS and EOS tokens as the request's fault, naming it, and embeds one that fits", async () => {
    const model = engine.modelPools[0]!.model;
    const room = engine.modelPools[0]!.contextSize - 2;
    // a text of exactly `room` tokens: the embedding context could not take it with its two extra tokens
    let text = "";
    while (model.tokenize(text).length < room) text += "ab ";
    while (model.tokenize(text).length > room) text = text.slice(0, -1);
    expect(model.tokenize(text)).toHaveLength(room);
    await expect(engine.embed("famB-v3.1", ["ok", text])).rejects.toMatchObject({ code: "context_length_exceeded", message: expect.stringMatching(/^input\[1\]: /) });
    const shorter = text.slice(0, Math.floor(text.length / 2));
    expect((await engine.embed("famB-v3.1", [shorter])).vectors).toHaveLength(1);
  });

  it("refuses a batch of more than 300,000 tokens in all, naming input, before embedding any of it", async () => {
    const long = "word ".repeat(100); // a few hundred tokens each, within the context
    const perInput = engine.modelPools[0]!.model.tokenize(long).length;
    const count = Math.floor(300_000 / perInput) + 1;
    await expect(
      engine.embed(
        "famB-v3.1",
        Array.from({ length: count }, () => long),
      ),
    ).rejects.toMatchObject({ code: "invalid_input", message: expect.stringMatching(/^input: the texts up to input\[\d+\] hold more than 300000 tokens/) });
  });

  it("does nothing for a request cancelled while it waited for the one before it", async () => {
    const ac = new AbortController();
    const first = engine.embed(
      "famB-v3.1",
      Array.from({ length: 20 }, (_, i) => `text ${i}`),
    );
    const second = engine.embed("famB-v3.1", ["never embedded"], { signal: ac.signal });
    ac.abort();
    await first;
    await expect(second).rejects.toMatchObject({ code: "cancelled" });
  });
});

describe("n choices without a seed", () => {
  it("draws each choice's seed of its own: the choices differ", async () => {
    const r = await engine.generate("famB-v3.1", [{ role: "user", content: "Tell me something" }], { n: 2, maxTokens: 12, temperature: 1.5, cacheScope: "unseeded" });
    expect(r.choices[0]!.text).not.toBe(r.choices[1]!.text);
  });
});

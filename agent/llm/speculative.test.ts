/**
 * Speculative decoding on the real binding: greedy output identical with and without it (prompt
 * lookup, a draft model), predictions counted, and the gate that turns it off while it does not pay.
 * The draft-model cases run on the real stories260K.gguf (KILN_TEST_DATA), where a model drafting
 * for itself is confident; the fabricated tiny model's random weights never are.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getLlama, InputLookupTokenPredictor, TokenPredictor, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type Token } from "node-llama-cpp";
import { createLogger } from "../../core/log.js";
import { TEST_MODELS } from "../../fabricate/index.js";
import { vocabularyFromGguf, writeTinyLlama } from "../../fabricate/tiny-llama.js";
import { TINY_MODEL, tempDir } from "../../test/helpers/fleet.js";
import { createAgentMetrics } from "../metrics.js";
import { LlmEngine } from "./engine.js";
import { parseSpeculation } from "../../core/speculation.js";
import { GatedTokenPredictor, SPECULATION_RULE, SpeculationGate, type Speculation } from "./speculative.js";
import { generateTurn, renderRawPrompt } from "./turn.js";
import { watchBinding } from "../../test/helpers/binding.js";
import { installedAddon } from "../../core/prebuilt.js";

const STORIES = process.env.KILN_TEST_DATA ? join(process.env.KILN_TEST_DATA, "models", "stories260K.gguf") : undefined;
const realData = STORIES !== undefined && existsSync(STORIES);

const PROMPTS = ["Once upon a time there was a little girl. Once upon a time there was a little", "The cat sat on the mat. The dog sat on the"];

/** One engine serving `path` with `speculative`; the texts of greedy generations of PROMPTS, and the pool's gate. */
async function greedy(path: string, speculative: Speculation | undefined, maxTokens: number, prompts = PROMPTS): Promise<{ texts: string[]; gate?: SpeculationGate }> {
  const engine = await LlmEngine.load({
    models: [{ id: "m", path, ...(speculative ? { speculative } : {}) }],
    sequences: 1,
    contextSize: 512,
    threads: 1,
    gpu: "cpu",
    logger: createLogger("test", "silent"),
  });
  try {
    const texts: string[] = [];
    for (const prompt of prompts) {
      texts.push((await engine.generate("m", { prompt }, { temperature: 0, maxTokens })).text);
      texts.push((await engine.generate("m", [{ role: "user", content: prompt }], { temperature: 0, maxTokens })).text);
      // penalties punish the tokens before each place: a prediction tested against a stale list would differ
      texts.push((await engine.generate("m", { prompt }, { temperature: 0, maxTokens, sampling: { repeatPenalty: 1.5, frequencyPenalty: 1 } })).text);
    }
    const gate = engine.modelPools[0]!.speculation;
    return { texts, ...(gate ? { gate } : {}) };
  } finally {
    await engine.dispose();
  }
}

describe("speculation values", () => {
  it("reads lookup and draft:SOURCE, and says what else is wrong", () => {
    expect(parseSpeculation("lookup")).toEqual({ kind: "lookup" });
    expect(parseSpeculation("draft:/m/d.gguf")).toEqual({ kind: "draft", source: "/m/d.gguf" });
    expect(parseSpeculation("draft:hf:org/repo/d.gguf")).toEqual({ kind: "draft", source: "hf:org/repo/d.gguf" });
    expect(parseSpeculation("draft:")).toMatch(/expected "lookup" or "draft:GGUF"/);
    expect(parseSpeculation("ngram")).toMatch(/got "ngram"/);
    expect(parseSpeculation(`draft:${"x".repeat(1100)}`)).toMatch(/longer than 1024/);
  });
});

describe("the gate's rule", () => {
  const lookup = { kind: "lookup" } as const;
  /** Records `count` steps of `validated` confirmed and `refuted` refuted predictions each. */
  const steps = (gate: SpeculationGate, count: number, validated: number, refuted: number): void => {
    for (let i = 0; i < count; i++) gate.record(validated, refuted);
  };

  it("by default turns a predictor that is always refused off after 6 refuted predictions, a draft that proposes nothing after 6 empty rounds", () => {
    const refused = new SpeculationGate(lookup);
    steps(refused, 5, 0, 1);
    expect(refused.on).toBe(true);
    steps(refused, 1, 0, 1);
    expect([refused.on, refused.turnedOff]).toEqual([false, 1]);
    const draft = new SpeculationGate(lookup); // a draft's rounds of 4
    steps(draft, 1, 0, 4);
    expect(draft.on).toBe(true);
    steps(draft, 1, 0, 4);
    expect([draft.on, draft.turnedOff, draft.refuted]).toEqual([false, 1, 8]);
    const empty = new SpeculationGate(lookup);
    for (let i = 0; i < 5; i++) empty.record(0, 0, 1);
    expect(empty.on).toBe(true);
    empty.record(0, 0, 1);
    expect([empty.on, empty.turnedOff, empty.emptyRounds, empty.refuted]).toEqual([false, 1, 6, 0]);
  });

  it("keeps a predictor well above the losing acceptance on, and turns one near it off", () => {
    const paying = new SpeculationGate(lookup);
    steps(paying, 2000, 2, 2); // half of each step's predictions validated
    expect([paying.on, paying.turnedOff, paying.acceptance]).toEqual([true, 0, 0.5]);
    const drafting = new SpeculationGate(lookup); // a draft confident now and then: 3 validated, then 3 empty rounds
    for (let i = 0; i < 2000; i++) drafting.record(3, 0, 3);
    expect([drafting.on, drafting.turnedOff]).toEqual([true, 0]);
    const failing = new SpeculationGate(lookup);
    for (let i = 0; i < 100 && failing.on; i++) failing.record(1, 4); // 20 % validated
    expect([failing.on, failing.turnedOff]).toEqual([false, 1]);
  });

  it("once judged on (3 validated predictions), keeps its evidence at the bound: 12 refusals in a row turn it off however long it paid", () => {
    for (const confirmed of [3, 1000]) {
      const gate = new SpeculationGate(lookup);
      steps(gate, confirmed, 1, 0);
      steps(gate, 11, 0, 1);
      expect(gate.on).toBe(true);
      steps(gate, 1, 0, 1);
      expect([gate.on, gate.turnedOff]).toEqual([false, 1]);
    }
    const pending = new SpeculationGate(lookup); // 2 validated: no judgement yet, evidence that offsets refusals
    steps(pending, 2, 1, 0);
    steps(pending, 10, 0, 1);
    expect(pending.on).toBe(true);
    steps(pending, 1, 0, 1);
    expect(pending.on).toBe(false);
  });

  it("goes off, probes again after offTokens, backs off while probes fail, and resets after one passes", () => {
    const rule = { ...SPECULATION_RULE, offTokens: 100, maxOffTokens: 300 };
    const gate = new SpeculationGate(lookup, rule);
    steps(gate, 3, 0, 2);
    expect([gate.on, gate.turnedOff]).toEqual([false, 1]);
    gate.record(5, 5); // tested while off (a step under way): counted, not judged
    expect([gate.validated, gate.refuted, gate.on]).toEqual([5, 11, false]);
    gate.generated(99);
    expect(gate.on).toBe(false);
    gate.generated(1);
    expect(gate.on).toBe(true); // a probe, the test from 0
    for (let i = 0; i < 6; i++) gate.record(0, 0, 1); // a draft's empty rounds count against it
    expect([gate.on, gate.turnedOff, gate.emptyRounds]).toEqual([false, 2, 6]);
    gate.generated(199);
    expect(gate.on).toBe(false); // twice as long off
    gate.generated(1);
    steps(gate, 2, 0, 3);
    gate.generated(299);
    expect(gate.on).toBe(false); // capped at maxOffTokens
    gate.generated(1);
    gate.record(4, 0); // the probe passes
    expect(gate.on).toBe(true);
    steps(gate, 4, 0, 3); // 12 refusals from the on bound
    expect(gate.on).toBe(false);
    gate.generated(100);
    expect(gate.on).toBe(true); // back to offTokens
  });

  it("counts each token of a turn that handed off once toward the next probe: those before the hand-off as they came, the rest at its end", () => {
    const gate = new SpeculationGate(lookup, { ...SPECULATION_RULE, offTokens: 10 });
    const predictor = new GatedTokenPredictor(gate, new InputLookupTokenPredictor());
    // what the predictor reads of the target sequence: its counts of validated and refuted predictions
    const target = { tokenPredictions: { validated: 0, refuted: 0 } } as unknown as LlamaContextSequence;
    void predictor.reset({ targetSequence: target, stateTokens: [1, 2, 3] as Token[], evaluateOptions: {} });
    steps(gate, 3, 0, 2); // the gate turns off during the turn
    expect(gate.on).toBe(false);
    predictor.pushTokens([4, 5, 6, 7] as Token[]); // 4 tokens on the speculative path after it turned off
    expect(predictor.kilnHandOff()).toBe(true);
    predictor.endTurn(7); // 3 more on the plain path
    expect(gate.on).toBe(false); // 7 of the 10 tokens off counted, not 11
    gate.generated(2);
    expect(gate.on).toBe(false);
    gate.generated(1);
    expect(gate.on).toBe(true);
  });

  it("refuses a rule whose acceptances or error rate make no test", () => {
    expect(() => new SpeculationGate(lookup, { ...SPECULATION_RULE, losingAcceptance: 0.5 })).toThrow(RangeError);
    expect(() => new SpeculationGate(lookup, { ...SPECULATION_RULE, payingAcceptance: 1 })).toThrow(RangeError);
    expect(() => new SpeculationGate(lookup, { ...SPECULATION_RULE, errorRate: 0.5 })).toThrow(RangeError);
    expect(() => new SpeculationGate(lookup, { ...SPECULATION_RULE, errorRate: 0 })).toThrow(RangeError);
  });
});

describe("speculative decoding on the tiny model", () => {
  it("greedy output with prompt lookup is the output without it, and its predictions are counted", async () => {
    const plain = await greedy(TINY_MODEL, undefined, 80);
    const lookup = await greedy(TINY_MODEL, { kind: "lookup" }, 80);
    expect(lookup.texts).toEqual(plain.texts);
    expect(lookup.gate!.validated + lookup.gate!.refuted).toBeGreaterThan(0);
  });

  it("puts each speculating model's validated and refuted predictions, and whether it is on, in the agent's metrics", async () => {
    const engine = await LlmEngine.load({
      models: [
        { id: "spec", path: TINY_MODEL, speculative: { kind: "lookup" } },
        { id: "plain", path: join(process.cwd(), ".kiln/test-models/tiny-chat-split-00001-of-00002.gguf") },
      ],
      sequences: 1,
      contextSize: 512,
      threads: 1,
      gpu: "cpu",
      logger: createLogger("test", "silent"),
    });
    try {
      await engine.generate("spec", { prompt: PROMPTS[0]! }, { temperature: 0, maxTokens: 80 });
      const metrics = createAgentMetrics({
        jobs: () => ({ counts: () => ({ running: 0, queued: 0 }) }) as never,
        whisper: () => ({ chunksDecoded: 0 }) as never,
        engine,
        links: () => undefined,
      });
      const text = await metrics.registry.metrics();
      const gate = engine.modelPools[0]!.speculation!;
      expect(gate.refuted).toBeGreaterThan(0);
      expect(text).toContain(`kiln_llm_speculative_refuted_total{model="spec",component="agent"} ${gate.refuted}`);
      expect(text).toContain(`kiln_llm_speculative_validated_total{model="spec",component="agent"} ${gate.validated}`);
      expect(text).toContain(`kiln_llm_speculative_on{model="spec",component="agent"} ${gate.on ? 1 : 0}`);
      expect(text).not.toContain('model="plain"'); // a model that does not speculate has no series
    } finally {
      await engine.dispose();
    }
  });

  it("refuses at load a draft whose vocabulary cannot draft for the model, naming why (not ready, then failing every request)", async () => {
    // the tiny model's own vocabulary with another end-of-generation token: llama.cpp's special tokens differ
    const vocabulary = await vocabularyFromGguf(TINY_MODEL);
    const eos = vocabulary.metadata["tokenizer.ggml.eos_token_id"]!;
    const other = { ...vocabulary, metadata: { ...vocabulary.metadata, "tokenizer.ggml.eos_token_id": { ...eos, value: (eos.value as number) === 2 ? 3 : 2 } } };
    const draft = join(tempDir(), "mismatched-draft.gguf");
    await writeTinyLlama(draft, { ...TEST_MODELS.tiny.options, seed: 9, vocabulary: other as typeof vocabulary });
    const loading = LlmEngine.load({
      models: [{ id: "m", path: TINY_MODEL, speculative: { kind: "draft", source: draft } }],
      sequences: 1,
      contextSize: 512,
      threads: 1,
      gpu: "cpu",
      logger: createLogger("test", "silent"),
    });
    await expect(loading).rejects.toThrow(/its draft model cannot draft for it: .*special tokens must match/);
  });

  it("a turn that begins with the gate off, or whose options never speculate, never asks the predictor (node-llama-cpp's plain path); a gated-off turn's tokens count toward the next probe", async () => {
    const engine = await LlmEngine.load({
      models: [{ id: "m", path: TINY_MODEL, speculative: { kind: "lookup" } }],
      sequences: 1,
      contextSize: 512,
      threads: 1,
      gpu: "cpu",
      logger: createLogger("test", "silent"),
    });
    const asked = vi.spyOn(GatedTokenPredictor.prototype, "predictTokens");
    try {
      const gate = engine.modelPools[0]!.speculation!;
      gate.record(0, 100); // refuted: off for offTokens generated tokens
      expect(gate.on).toBe(false);
      let generated = 0;
      while (generated < SPECULATION_RULE.offTokens) {
        expect(gate.on).toBe(false);
        generated += (await engine.generate("m", { prompt: PROMPTS[0]! }, { temperature: 0, maxTokens: 100 })).completionTokens;
      }
      expect(asked).not.toHaveBeenCalled();
      expect(gate.on).toBe(true); // the probe: the next turn speculates, unless its options never do
      await engine.generate("m", { prompt: PROMPTS[0]! }, { temperature: 0, maxTokens: 20, sampling: { repeatPenalty: 1.5 } });
      await engine.generate("m", { prompt: PROMPTS[0]! }, { temperature: 0.8, maxTokens: 20, sampling: { seed: 3 } });
      expect(asked).not.toHaveBeenCalled();
      await engine.generate("m", { prompt: PROMPTS[0]! }, { temperature: 0, maxTokens: 20 });
      expect(asked).toHaveBeenCalled();
    } finally {
      asked.mockRestore();
      await engine.dispose();
    }
  });

  describe("with a predictor that never agrees", () => {
    let llama: Llama;
    let model: LlamaModel;
    let context: LlamaContext;
    beforeAll(async () => {
      llama = await getLlama({ gpu: false, build: "never", maxThreads: 1 });
      model = await llama.loadModel({ modelPath: TINY_MODEL });
      context = await model.createContext({ sequences: 2, contextSize: 512, threads: 1 });
    });
    afterAll(async () => {
      await context?.dispose();
      await model?.dispose();
      await llama?.dispose();
    });

    /** Predicts `token` four times, every step. */
    class Wrong extends TokenPredictor {
      constructor(private readonly token: Token) {
        super();
      }
      reset(): void {}
      pushTokens(): void {}
      predictTokens(): Token[] {
        return [this.token, this.token, this.token, this.token];
      }
    }

    it("turns it off after 6 refuted predictions, with the same output, and keeps it off", async () => {
      const prompt = renderRawPrompt(model, PROMPTS[0]!);
      const plainSequence = context.getSequence();
      const plain = await generateTurn(plainSequence, prompt, { maxTokens: 150, temperature: 0 });
      plainSequence.dispose();
      const tokens = new Set(model.tokenize(plain.text));
      // a token the greedy output never holds: every prediction of it is refuted
      const never = [...model.iterateAllTokens()].find((t) => !tokens.has(t) && !model.isEogToken(t) && model.detokenize([t]).length > 0)!;
      const gate = new SpeculationGate({ kind: "lookup" });
      const gated = new GatedTokenPredictor(gate, new Wrong(never));
      const sequence = context.getSequence({ tokenPredictor: gated });
      const asked = vi.spyOn(gated, "predictTokens");
      let loops = 0;
      const unwatch = watchBinding(context, ["generateTokens"], () => loops++);
      try {
        const ours = await generateTurn(sequence, prompt, { maxTokens: 150, temperature: 0 });
        expect(ours.text).toBe(plain.text);
        // once off, the rest of the turn went on without the predictor: the plain path, a lone sequence in the native loop
        expect(asked.mock.calls.length).toBe(2);
        if (installedAddon()) expect(loops).toBeGreaterThan(0);
        // 2 steps of 4 refuted predictions (SPECULATION_RULE turns it off after 6 refused); then nothing is predicted for offTokens (256) tokens
        const judged = 2 * 4;
        expect([gate.validated, gate.refuted, gate.turnedOff, gate.on]).toEqual([0, judged, 1, false]);
        expect(sequence.tokenPredictions.refuted).toBe(judged);
        // a seeded sample at a temperature above 0 never speculates (the seed would sample other tokens)
        gate.generated(SPECULATION_RULE.offTokens);
        expect(gate.on).toBe(true);
        await sequence.clearHistory();
        await generateTurn(sequence, prompt, { maxTokens: 40, temperature: 0.8, sampling: { seed: 7 } });
        expect(gate.refuted).toBe(judged);
      } finally {
        unwatch();
        sequence.dispose();
      }
    });
  });
});

describe.skipIf(!realData)("speculative decoding on stories260K (KILN_TEST_DATA)", () => {
  let disagreeing: string;
  beforeAll(async () => {
    // the same vocabulary, random weights: a draft that (almost) never agrees
    disagreeing = join(tempDir(), "disagreeing-draft.gguf");
    await writeTinyLlama(disagreeing, { ...TEST_MODELS.tiny.options, seed: 5, vocabulary: await vocabularyFromGguf(STORIES!) });
  });

  it("greedy output is the same without speculation, with prompt lookup, with the model as its own draft and with a draft that disagrees", async () => {
    const plain = await greedy(STORIES!, undefined, 120);
    const lookup = await greedy(STORIES!, { kind: "lookup" }, 120);
    const self = await greedy(STORIES!, { kind: "draft", source: STORIES! }, 120);
    const other = await greedy(STORIES!, { kind: "draft", source: disagreeing }, 120);
    expect(lookup.texts).toEqual(plain.texts);
    expect(self.texts).toEqual(plain.texts);
    expect(other.texts).toEqual(plain.texts);
    expect(lookup.gate!.validated).toBeGreaterThan(0);
    // its own draft: nearly every prediction validated
    expect(self.gate!.validated).toBeGreaterThan(100);
    expect(self.gate!.acceptance).toBeGreaterThan(0.9);
    expect(self.gate!.turnedOff).toBe(0);
  });

  it("turns a draft that never agrees off, and counts what it predicted", async () => {
    const other = await greedy(STORIES!, { kind: "draft", source: disagreeing }, 200, PROMPTS.slice(0, 1));
    const gate = other.gate!;
    expect(gate.turnedOff).toBeGreaterThanOrEqual(1);
    // at least the 6 refusals that turn it off (refuted predictions and empty rounds), few validated
    expect(gate.refuted + gate.emptyRounds).toBeGreaterThanOrEqual(6);
    expect(gate.acceptance).toBeLessThan(SPECULATION_RULE.losingAcceptance);
  });
});

if (!realData) {
  describe.skip("speculative decoding on stories260K (skipped: KILN_TEST_DATA is not set or lacks models/stories260K.gguf)", () => {
    it("needs KILN_TEST_DATA", () => {});
  });
}

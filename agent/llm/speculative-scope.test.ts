/**
 * A speculating slot that goes to another cache scope drops its draft's cache as well as its own
 * (the fabricated tiny model drafting for itself, real node-llama-cpp): no account's prompt prefix
 * stays in a draft sequence another account's request could reuse, and time.
 */
import { DraftSequenceTokenPredictor } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { LlmEngine } from "./index.js";
import { GatedTokenPredictor } from "./speculative.js";

const MODEL = "fam-own-draft";
let engine: LlmEngine;
beforeAll(async () => {
  engine = await LlmEngine.load({
    models: [{ id: MODEL, path: TINY_MODEL, speculative: { kind: "draft", source: TINY_MODEL } }],
    sequences: 1,
    contextSize: 512,
    threads: 1,
    gpu: "cpu",
    logger: createLogger("test", "silent"),
  });
});
afterAll(() => engine?.dispose());

describe("a speculating slot between cache scopes", () => {
  it("clears its draft's sequence when another scope takes the slot, as it clears its own", async () => {
    const pool = engine.modelPools[0]!;
    const slot = await pool.acquire();
    pool.release(slot);
    const predictor = slot.sequence.tokenPredictor;
    expect(predictor).toBeInstanceOf(GatedTokenPredictor);
    const draft = ((predictor as GatedTokenPredictor).inner as DraftSequenceTokenPredictor).draftSequence;
    const messages = [{ role: "user" as const, content: "Once upon a time there was a little kiln that fired pots all day long." }];
    await engine.generate(MODEL, messages, { maxTokens: 4, temperature: 0, cacheScope: "alice" });
    expect(draft.nextTokenIndex).toBeGreaterThan(0); // the draft evaluated alice's prompt
    const before = draft.tokenMeter.usedInputTokens;
    const mallory = await engine.generate(MODEL, messages, { maxTokens: 4, temperature: 0, cacheScope: "mallory" });
    // the draft evaluated mallory's whole prompt again: none of alice's was kept for it
    expect(draft.tokenMeter.usedInputTokens - before).toBeGreaterThanOrEqual(mallory.promptTokens - 1);
  });
});

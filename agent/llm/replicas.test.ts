/** Replicas the scheduler places: models loaded into a running engine and unloaded from it (the fabricated tiny model, real node-llama-cpp). */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { LlmEngine, ModelNotServedError } from "./index.js";

let engine: LlmEngine;
beforeAll(async () => {
  engine = await LlmEngine.load({ models: [], sequences: 1, contextSize: 256, threads: 1, gpu: "cpu", logger: createLogger("test", "silent") });
});
afterAll(() => engine?.dispose());

const hi = [{ role: "user" as const, content: "hi" }];

describe("a placeable engine", () => {
  it("loads a replica with its own context and slots, serves it under each of its ids, and refuses a second load of one", async () => {
    expect(engine.modelPools).toHaveLength(0);
    const pool = await engine.addModel(["fam-x", "alias-x"], TINY_MODEL, { sequences: 2, contextSize: 2048 });
    expect(engine.modelPools).toEqual([pool]);
    expect(pool.slots).toBe(2);
    expect(pool.contextSize).toBeGreaterThanOrEqual(2048);
    expect((await engine.generate("alias-x", hi, { maxTokens: 4, temperature: 0 })).completionTokens).toBeGreaterThan(0);
    await expect(engine.addModel(["fam-y", "fam-x"], TINY_MODEL, { sequences: 1, contextSize: 256 })).rejects.toMatchObject({ code: "model_already_loaded" });
    expect(engine.modelPools).toHaveLength(1);
  });

  it("unloads a replica once the request it runs ends, and takes no new one meanwhile", async () => {
    let texts = 0;
    let ended = false;
    // 1,500 greedy tokens (~0.3 s): still running when the unload comes, however slow the machine
    const story = [{ role: "user" as const, content: "tell me a long story" }];
    const running = engine.generate("fam-x", story, { maxTokens: 1500, temperature: 0, onText: () => texts++ });
    void running.then(() => (ended = true));
    while (texts === 0) await new Promise((r) => setTimeout(r, 5));
    const pool = engine.modelPools[0]!;
    expect(ended).toBe(false);
    const unloading = engine.removeModel("fam-x");
    expect(engine.serves("fam-x")).toBe(false);
    expect(engine.serves("alias-x")).toBe(false);
    await expect(engine.generate("fam-x", hi, { maxTokens: 1 })).rejects.toBeInstanceOf(ModelNotServedError);
    expect((await running).completionTokens).toBe(1500);
    expect(await unloading).toBe(0);
    expect(engine.modelPools).toHaveLength(0);
    expect(pool.model.disposed).toBe(true); // its weights freed, not only its context
    expect(await engine.removeModel("fam-x")).toBe(-1);
  });
});

/**
 * The slot a request gets: the free one whose KV cache shares the longest prefix with its prompt,
 * within its cache scope only (the fabricated tiny model, real node-llama-cpp). What the slot
 * reuses shows as `cachedTokens`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatMessage } from "../../core/chat.js";
import { createLogger } from "../../core/log.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { LlmEngine } from "./index.js";

const MODEL = "fam-slots";
let engine: LlmEngine;
beforeAll(async () => {
  engine = await LlmEngine.load({ models: [{ id: MODEL, path: TINY_MODEL }], sequences: 3, contextSize: 1024, threads: 1, gpu: "cpu", logger: createLogger("test", "silent") });
});
afterAll(() => engine?.dispose());

const user = (content: string): ChatMessage => ({ role: "user", content });
const turn = (messages: ChatMessage[], scope: string) => engine.generate(MODEL, messages, { maxTokens: 6, temperature: 0, cacheScope: scope });
const story = (topic: string) => user(`Tell me a long story about ${topic}, with ${"many details and ".repeat(12)}a happy end.`);

describe("prefix-aware slots", () => {
  it("gives a conversation's next turn the slot holding its earlier turns, though a newcomer took a slot in between", async () => {
    const first = [story("a dragon")];
    const a1 = await turn(first, "alice");
    // another conversation of the same account: lowest-slot-first would have put it on the first conversation's slot
    await turn([story("a lighthouse keeper")], "alice");
    const a2 = await turn([...first, { role: "assistant", content: a1.text }, user("And then?")], "alice");
    // all of the first turn's prompt is reused (its reply too, as far as the template renders it the same)
    expect(a2.cachedTokens).toBeGreaterThanOrEqual(a1.promptTokens - 1);
  });

  it("never reuses another scope's cache, even for the very same prompt", async () => {
    const messages = [story("a lost kite")];
    const mine = await turn(messages, "bob");
    expect((await turn(messages, "bob")).cachedTokens).toBe(mine.promptTokens - 1); // all but the last token, whose logits are needed
    expect((await turn(messages, "mallory")).cachedTokens).toBe(0);
  });
});

/** Function calling on the real node-llama-cpp binding with the fabricated tiny model (ChatML, node-llama-cpp's generic call syntax). */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ToolCallDelta, ToolFunction } from "../../core/chat.js";
import { createLogger } from "../../core/log.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { toHistory } from "./engine.js";
import { FunctionaryChatWrapper, HarmonyChatWrapper } from "node-llama-cpp";
import { functionsFor, generateToolTurn } from "./tool-turn.js";
import { renderPrompt } from "./turn.js";
import { GenerationAbortedError, LlmEngine } from "./index.js";

let engine: LlmEngine;
// the tiny vocabulary is one character per token: the tools' documentation takes about a thousand
beforeAll(async () => {
  engine = await LlmEngine.load({
    models: [{ id: "famB-v3.1", path: TINY_MODEL }],
    sequences: 2,
    contextSize: 2048,
    threads: 1,
    gpu: "cpu",
    logger: createLogger("test", "silent"),
  });
});
afterAll(() => engine?.dispose());

const weather: ToolFunction = {
  name: "get_weather",
  description: "The weather in a city",
  parameters: {
    type: "object",
    properties: { city: { enum: ["Paris", "Rome", "Oslo"] }, days: { type: "integer" }, units: { enum: ["C", "F"] } },
    required: ["city", "days", "units"],
  },
};
const time: ToolFunction = { name: "get_time", description: "The time now" };
const ask = [{ role: "user" as const, content: "What is the weather in Paris?" }];

/** Generates with `tools`, gathering the streamed pieces of each call by index. */
async function callWith(options: Parameters<LlmEngine["generate"]>[2], messages: Parameters<LlmEngine["generate"]>[1] = ask) {
  const streamed: ToolCallDelta[] = [];
  let text = "";
  const result = await engine.generate("famB-v3.1", messages, {
    maxTokens: 120,
    temperature: 0.8,
    ...options,
    onToolCall: (d) => streamed.push(d),
    onText: (t) => {
      text += t;
    },
  });
  const joined = new Map<number, { name: string; arguments: string }>();
  for (const d of streamed) {
    if (d.name !== undefined) {
      expect(joined.has(d.index)).toBe(false);
      joined.set(d.index, { name: d.name, arguments: "" });
    }
    joined.get(d.index)!.arguments += d.arguments;
  }
  return { result, streamed, joined: [...joined.values()], text };
}

describe("function calling", () => {
  it("required: the reply is calls of offered functions, arguments that parse and hold to the parameters, streamed in pieces that join to them", async () => {
    for (const [seed, tools] of [
      [1, [weather]],
      [2, [weather]],
      [3, [weather, time]],
    ] as const) {
      const { result, streamed, joined } = await callWith({ tools: [...tools], toolChoice: "required", sampling: { seed } });
      const choice = result.choices[0]!;
      expect(choice.finishReason).toBe("tool_calls");
      expect(choice.toolCalls!.length).toBeGreaterThan(0);
      expect(joined).toEqual(choice.toolCalls);
      expect(streamed[0]!.name).toBeDefined();
      if (tools.length === 1) expect(streamed.length).toBeGreaterThan(3); // the arguments come in pieces
      for (const call of choice.toolCalls!) {
        const args = JSON.parse(call.arguments) as Record<string, unknown>;
        expect(call.arguments).toBe(call.arguments.trim());
        if (call.name === "get_time") expect(args).toEqual({});
        else {
          expect(call.name).toBe("get_weather");
          expect(Object.keys(args).sort()).toEqual(["city", "days", "units"]);
          expect(["Paris", "Rome", "Oslo"]).toContain(args.city);
          expect(Number.isInteger(args.days)).toBe(true);
          expect(["C", "F"]).toContain(args.units);
        }
      }
      expect(result.completionTokens).toBeGreaterThan(0);
    }
  });

  it("a named function: every call is of that one; parallel_tool_calls false: one call at most", async () => {
    for (const seed of [4, 5, 6]) {
      const { result } = await callWith({ tools: [weather, time], toolChoice: { name: "get_time" }, parallelToolCalls: false, sampling: { seed } });
      expect(result.finishReason).toBe("tool_calls");
      expect(result.choices[0]!.toolCalls).toEqual([{ name: "get_time", arguments: "{}" }]);
    }
  });

  it("calls tools named __proto__ and constructor like any other (the functions are kept in a prototype-free object)", async () => {
    const hostile = [
      { ...weather, name: "__proto__" },
      { name: "constructor", description: "c" },
    ];
    const { result } = await callWith({ tools: hostile, toolChoice: { name: "__proto__" }, sampling: { seed: 7 } });
    expect(result.choices[0]!.toolCalls![0]!.name).toBe("__proto__");
    expect(Object.keys(JSON.parse(result.choices[0]!.toolCalls![0]!.arguments) as object).sort()).toEqual(["city", "days", "units"]);
    const named = await callWith({ tools: hostile, toolChoice: { name: "constructor" }, sampling: { seed: 7 } });
    expect(named.result.choices[0]!.toolCalls![0]).toEqual({ name: "constructor", arguments: "{}" });
  });

  it("auto: the reply may be text, streamed as returned, without calls", async () => {
    const { result, text } = await callWith({ tools: [weather], sampling: { seed: 1, stop: ["||"] }, maxTokens: 30 });
    expect(result.choices[0]!.toolCalls).toBeUndefined();
    expect(["stop", "length"]).toContain(result.finishReason);
    expect(result.text).toBe(text);
  });

  it("auto with stop texts: a text reply ends at the first, which the result names", async () => {
    const options = { tools: [weather], temperature: 0, maxTokens: 30 };
    const { result: full } = await callWith(options);
    expect(full.choices[0]!.toolCalls).toBeUndefined(); // the greedy reply is text
    expect(full.text.length).toBeGreaterThan(4);
    const stop = full.text.slice(2, 4);
    const { result } = await callWith({ ...options, sampling: { stop: ["\u0000never", stop] } });
    expect(result).toMatchObject({ text: full.text.slice(0, full.text.indexOf(stop)), finishReason: "stop", stopText: stop });
  });

  it("renders an assistant's call and the tool message answering it into the prompt, in order", () => {
    const pool = engine.modelPools[0]!;
    const history = toHistory([
      ...ask,
      { role: "assistant", content: "", toolCalls: [{ id: "call_A", name: "get_weather", arguments: '{"city":"Paris","days":2,"units":"C"}' }] },
      { role: "tool", content: '{"sky":"CLEAR-SKIES-7"}', toolCallId: "call_A" },
      { role: "user", content: "And tomorrow?" },
    ]);
    const prompt = pool.model.detokenize(pool.render(history).tokens, true);
    const call = prompt.indexOf('get_weather({"city": "Paris", "days": 2, "units": "C"})'); // node-llama-cpp writes JSON with spaces
    const result = prompt.indexOf("CLEAR-SKIES-7");
    expect(call).toBeGreaterThan(prompt.indexOf("What is the weather in Paris?"));
    expect(result).toBeGreaterThan(call);
    expect(prompt.indexOf("And tomorrow?")).toBeGreaterThan(result);
  });

  it("shows the model each call's own result when call ids repeat from turn to turn (call_0 every time)", () => {
    const pool = engine.modelPools[0]!;
    const history = toHistory([
      ...ask,
      { role: "assistant", content: "", toolCalls: [{ id: "call_0", name: "get_weather", arguments: '{"city":"Paris"}' }] },
      { role: "tool", content: "RESULT-ONE", toolCallId: "call_0" },
      { role: "user", content: "And Rome?" },
      { role: "assistant", content: "", toolCalls: [{ id: "call_0", name: "get_weather", arguments: '{"city":"Rome"}' }] },
      { role: "tool", content: "RESULT-TWO", toolCallId: "call_0" },
    ]);
    const prompt = pool.model.detokenize(pool.render(history).tokens, true);
    const order = ['"Paris"', "RESULT-ONE", "And Rome?", '"Rome"', "RESULT-TWO"].map((t) => prompt.indexOf(t));
    expect(order.every((at) => at >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(prompt.split("RESULT-TWO")).toHaveLength(2); // once: the last result is not shown for the first call
  });

  it("documents each function with its parameters' descriptions for the model", () => {
    const pool = engine.modelPools[0]!;
    const described: ToolFunction = {
      name: "book",
      description: "Books a table",
      parameters: { type: "object", properties: { guests: { type: "integer", description: "HOW-MANY-PEOPLE" } } },
    };
    const prompt = pool.model.detokenize(pool.render(toHistory(ask), functionsFor([described], "auto")).tokens, true);
    expect(prompt).toContain("Books a table");
    expect(prompt).toContain("HOW-MANY-PEOPLE");
  });

  it("refuses parameters whose documentation would blow up (nested arrays with minItems write their item out again and again), before rendering anything", async () => {
    let nested: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 7; i++) nested = { type: "array", items: nested, minItems: 9, maxItems: 9 };
    const tool: ToolFunction = { name: "boom", parameters: { type: "object", properties: { x: nested } } };
    expect(JSON.stringify(tool.parameters).length).toBeLessThan(500);
    await expect(engine.generate("famB-v3.1", ask, { tools: [tool] })).rejects.toMatchObject({
      code: "invalid_tools",
      message: expect.stringMatching(/^tools\[0\]\.function\.parameters: documented for the model, these parameters would take about \d+ bytes/),
    });
    expect(engine.modelPools[0]!.busy).toBe(0);
  });

  it("ends the turn at the context's end with finish_reason length (no context shift erasing the conversation)", async () => {
    const pool = engine.modelPools[0]!;
    const rendered = pool.render(toHistory(ask), functionsFor([weather], "required")).tokens.length;
    const filler = "x".repeat(pool.contextSize - rendered - 12); // about 12 tokens left: less than the call takes
    const { result } = await callWith({ tools: [weather], toolChoice: "required", sampling: { seed: 1 } }, [{ role: "user", content: `${filler} What is the weather in Paris?` }]);
    expect(result.finishReason).toBe("length");
    expect(result.promptTokens + result.completionTokens).toBeLessThanOrEqual(pool.contextSize);
  });

  it("forcing a call: Harmony's channel goes before the call as its template writes one; Functionary's template cannot force one and is refused", async () => {
    const pool = engine.modelPools[0]!;
    const slot = await pool.acquire();
    try {
      const history = toHistory(ask);
      const functions = functionsFor([weather], "required");
      const harmony = new HarmonyChatWrapper();
      const options = { tools: [weather], toolChoice: "required" as const, parallelToolCalls: false, maxTokens: 80, temperature: 0 };
      const turn = await generateToolTurn(slot.sequence, harmony, history, functions, renderPrompt(pool.model, harmony, history, functions).tokens, options);
      expect(turn.toolCalls[0]?.name).toBe("get_weather");
      const written = pool.model.detokenize(slot.sequence.contextTokens, true);
      expect(written.slice(written.lastIndexOf("<|start|>assistant"))).toMatch(/^<\|start\|>assistant<\|channel\|>commentary to=functions\.get_weather/);
      const functionary = new FunctionaryChatWrapper();
      await expect(
        generateToolTurn(slot.sequence, functionary, history, functions, renderPrompt(pool.model, functionary, history, functions).tokens, options),
      ).rejects.toMatchObject({
        code: "invalid_tools",
        message: expect.stringMatching(/^tool_choice: this model's chat template \(Functionary\) lets the model answer without a call/),
      });
    } finally {
      pool.release(slot);
    }
  });

  it("refuses what cannot go with tools, and tool messages that answer no call", async () => {
    await expect(engine.generate("famB-v3.1", ask, { tools: [weather], n: 2 })).rejects.toMatchObject({ code: "invalid_tools" });
    await expect(engine.generate("famB-v3.1", ask, { tools: [weather], toolChoice: { name: "nope" } })).rejects.toMatchObject({
      code: "invalid_tools",
      message: 'tool_choice: "nope" is not one of the tools',
    });
    await expect(engine.generate("famB-v3.1", [...ask, { role: "tool", content: "x", toolCallId: "call_Z" }])).rejects.toMatchObject({
      code: "invalid_request",
      message: expect.stringMatching(/^messages\[1\]\.tool_call_id: /),
    });
    await expect(
      engine.generate("famB-v3.1", ask, { tools: [{ name: "f", parameters: { type: "object", properties: { a: { type: "string", pattern: "x" } } } }] }),
    ).rejects.toMatchObject({ code: "invalid_tools", message: expect.stringMatching(/^tools\[0\]\.function\.parameters\.properties\.a\.pattern: /) });
    expect(engine.modelPools[0]!.busy).toBe(0);
  });

  it("an abort in the middle of a call stops it and frees the slot", async () => {
    const ac = new AbortController();
    const pending = engine.generate("famB-v3.1", ask, { tools: [weather], toolChoice: "required", maxTokens: 400, signal: ac.signal, onToolCall: () => ac.abort() });
    await expect(pending).rejects.toBeInstanceOf(GenerationAbortedError);
    expect(engine.modelPools[0]!.busy).toBe(0);
  });
});

/**
 * The Responses API's translation, both ways: a `POST /v1/responses` body into the fleet's request
 * (responses-schema.ts; what is refused, by name), and the fleet's events into the Response object and
 * its typed stream events (responses.ts).
 */
import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "../../core/errors.js";
import type { Done } from "./openai.js";
import { ResponseWriter, type ResponseEvent } from "./responses.js";
import { validateResponses, type ResponseEcho } from "./responses-schema.js";

const MODEL = "famB-v3.1";
const weather = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
};

function refusal(body: Record<string, unknown>): { code: string; param: string | null | undefined; message: string } {
  try {
    validateResponses({ model: MODEL, input: "hi", ...body });
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequestError);
    const e = (err as InvalidRequestError).toBody().error;
    return { code: e.code, param: e.param, message: e.message };
  }
  throw new Error(`accepted: ${JSON.stringify(body)}`);
}

describe("a request into the fleet's request", () => {
  it("a string input after the instructions: a system and a user message; the sampling fields and limits as chat has them", () => {
    const b = validateResponses({ model: MODEL, instructions: "Be brief.", input: "Hello", max_output_tokens: 12, temperature: 0.5, top_p: 0.9 });
    expect(b).toMatchObject({
      model: MODEL,
      requestedModel: MODEL,
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hello" },
      ],
      maxTokens: 12,
      temperature: 0.5,
      sampling: { topP: 0.9 },
      stream: false,
      ignored: [],
    });
    expect(b.tools).toBeUndefined();
    expect(b.responseFormat).toBeUndefined();
    expect(b.echo).toMatchObject({
      instructions: "Be brief.",
      maxOutputTokens: 12,
      temperature: 0.5,
      topP: 0.9,
      metadata: {},
      parallelToolCalls: true,
      toolChoice: "auto",
      format: { type: "text" },
    });
  });

  it("the scheduler's default max tokens when the request gives none; the engine's defaults otherwise", () => {
    const b = validateResponses({ model: MODEL, input: "x" }, { defaultMaxTokens: 7 });
    expect(b.maxTokens).toBe(7);
    expect(b.temperature).toBeUndefined();
    expect(b.sampling).toBeUndefined();
    expect(b.echo).toMatchObject({ temperature: 1, topP: 1, maxOutputTokens: null });
  });

  it("items: text parts joined, developer as system, an assistant's text and its function calls one message, each output a tool message", () => {
    const b = validateResponses({
      model: MODEL,
      input: [
        { role: "developer", content: "Answer in French." },
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "Weather in " },
            { type: "input_text", text: "Paris and Rome?" },
          ],
        },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Let me look." }], id: "msg_1", status: "completed" },
        { type: "function_call", call_id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}', id: "fc_1", status: "completed" },
        { type: "function_call", call_id: "call_b", name: "get_weather", arguments: '{"city":"Rome"}' },
        { type: "function_call_output", call_id: "call_a", output: "sunny" },
        { type: "function_call_output", call_id: "call_b", output: [{ type: "input_text", text: "rain" }] },
        { role: "user", content: "Thanks" },
      ],
      tools: [weather],
    });
    expect(b.messages).toEqual([
      { role: "system", content: "Answer in French." },
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant",
        content: "Let me look.",
        toolCalls: [
          { id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}' },
          { id: "call_b", name: "get_weather", arguments: '{"city":"Rome"}' },
        ],
      },
      { role: "tool", content: "sunny", toolCallId: "call_a" },
      { role: "tool", content: "rain", toolCallId: "call_b" },
      { role: "user", content: "Thanks" },
    ]);
    expect(b.tools).toEqual([{ name: "get_weather", description: "The weather in a city", parameters: weather.parameters }]);
    expect(b.toolChoice).toBeUndefined(); // auto
  });

  it("tool_choice: a named function, required, none (the tools not shown), allowed_tools (only those shown); parallel_tool_calls false", () => {
    const clock = { type: "function", name: "get_time", parameters: null, strict: false };
    const tools = [weather, clock];
    expect(validateResponses({ model: MODEL, input: "x", tools, tool_choice: { type: "function", name: "get_time" } }).toolChoice).toEqual({ name: "get_time" });
    expect(validateResponses({ model: MODEL, input: "x", tools, tool_choice: "required", parallel_tool_calls: false })).toMatchObject({
      toolChoice: "required",
      parallelToolCalls: false,
    });
    expect(validateResponses({ model: MODEL, input: "x", tools, tool_choice: "none" }).tools).toBeUndefined();
    const allowed = validateResponses({
      model: MODEL,
      input: "x",
      tools,
      tool_choice: { type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "get_time" }] },
    });
    expect(allowed.tools).toEqual([{ name: "get_time" }]);
    expect(allowed.toolChoice).toBe("required");
    expect(allowed.echo.tools).toEqual([
      { type: "function", name: "get_weather", description: "The weather in a city", parameters: weather.parameters, strict: null },
      { type: "function", name: "get_time", description: null, parameters: null, strict: false },
    ]);
  });

  it("text.format: json_schema and json_object take the grammar path response_format takes", () => {
    const schema = { type: "object", properties: { answer: { enum: ["yes", "no"] } }, required: ["answer"], additionalProperties: false };
    expect(validateResponses({ model: MODEL, input: "x", text: { format: { type: "json_schema", name: "answer", schema, strict: true } } }).responseFormat).toEqual({
      type: "json_schema",
      schema,
    });
    expect(validateResponses({ model: MODEL, input: "x", text: { format: { type: "json_object" } } }).responseFormat).toEqual({ type: "json_object" });
    expect(validateResponses({ model: MODEL, input: "x", text: { format: { type: "text" }, verbosity: "medium" } }).responseFormat).toBeUndefined();
  });

  it("accepted as they are: store false, an empty include, no reasoning, metadata and identifiers given back; unknown members listed as ignored", () => {
    const b = validateResponses({
      model: MODEL,
      input: "x",
      store: false,
      include: [],
      reasoning: { effort: null, summary: null },
      truncation: "disabled",
      background: false,
      metadata: { run: "7" },
      user: "u-1",
      prompt_cache_key: "k",
      stream: true,
      stream_options: { include_obfuscation: false },
      max_tool_calls: 3,
    });
    expect(b.stream).toBe(true);
    expect(b.echo).toMatchObject({ metadata: { run: "7" }, user: "u-1", promptCacheKey: "k" });
    expect(b.ignored).toEqual(["user", "prompt_cache_key", "max_tool_calls"]);
  });

  it.each([
    ["store", { store: true }, "unsupported_parameter"],
    ["previous_response_id", { previous_response_id: "resp_123" }, "unsupported_parameter"],
    ["conversation", { conversation: "conv_1" }, "unsupported_parameter"],
    ["background", { background: true }, "unsupported_parameter"],
    ["include", { include: ["reasoning.encrypted_content"] }, "unsupported_parameter"],
    ["reasoning.effort", { reasoning: { effort: "high" } }, "unsupported_parameter"],
    ["reasoning.summary", { reasoning: { summary: "auto" } }, "unsupported_parameter"],
    ["truncation", { truncation: "auto" }, "unsupported_parameter"],
    ["prompt", { prompt: { id: "pmpt_1" } }, "unsupported_parameter"],
    ["text.verbosity", { text: { verbosity: "low" } }, "unsupported_parameter"],
    ["stream_options.include_obfuscation", { stream_options: { include_obfuscation: true } }, "unsupported_parameter"],
    ["top_logprobs", { top_logprobs: 3 }, "unsupported_parameter"],
    ["service_tier", { service_tier: "flex" }, "unsupported_parameter"],
    ["tools[0].type", { tools: [{ type: "web_search" }] }, "unsupported_parameter"],
    ["tools[1].type", { tools: [weather, { type: "file_search", vector_store_ids: ["vs_1"] }] }, "unsupported_parameter"],
    ["tools[0].type", { tools: [{ type: "computer_use_preview", display_width: 1, display_height: 1, environment: "linux" }] }, "unsupported_parameter"],
    ["tool_choice.type", { tools: [weather], tool_choice: { type: "web_search_preview" } }, "unsupported_parameter"],
    [
      "input[0].content[1].type",
      {
        input: [
          {
            role: "user",
            content: [
              { type: "input_text", text: "see" },
              { type: "input_image", image_url: "https://x/y.png" },
            ],
          },
        ],
      },
      "unsupported_content",
    ],
    ["input[0].content[0].type", { input: [{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }] }, "unsupported_content"],
    ["input[0].type", { input: [{ type: "item_reference", id: "msg_1" }] }, "unsupported_parameter"],
    [
      "input[1].type",
      {
        input: [
          { role: "user", content: "x" },
          { type: "reasoning", id: "rs_1", summary: [] },
        ],
      },
      "unsupported_parameter",
    ],
    ["input[0].role", { input: [{ role: "tool", content: "x" }] }, "invalid_role"],
    [
      "input[1].call_id",
      {
        input: [
          { role: "user", content: "x" },
          { type: "function_call_output", call_id: "call_zz", output: "1" },
        ],
      },
      "invalid_input",
    ],
    [
      "input[1]",
      {
        input: [
          { role: "user", content: "x" },
          { type: "function_call", call_id: "call_a", name: "f", arguments: "{}" },
          { role: "user", content: "and?" },
        ],
      },
      "invalid_input",
    ],
    ["input[0].arguments", { input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{not json" }] }, "invalid_input"],
    ["input", { input: [] }, "invalid_input"],
    ["input", { input: undefined }, "missing_required_field"],
    ["temperature", { temperature: 2.5 }, "invalid_temperature"],
    ["max_output_tokens", { max_output_tokens: 0 }, "invalid_max_output_tokens"],
    ["metadata", { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "invalid_metadata"],
    ["metadata", { metadata: { k: "v".repeat(513) } }, "invalid_metadata"],
    ["metadata", { metadata: { ["k".repeat(65)]: "v" } }, "invalid_metadata"],
    ["tool_choice", { tools: [weather], tool_choice: "sometimes" }, "invalid_tool_choice"],
    ["user", { user: "u".repeat(257) }, "invalid_user"],
    ["model", { model: "gpt-4o" }, "model_not_found"],
    ["tool_choice.name", { tools: [weather], tool_choice: { type: "function", name: "get_time" } }, "invalid_tool_choice"],
    ["tool_choice", { tool_choice: "required" }, "invalid_tool_choice"],
    ["tools[1].name", { tools: [weather, weather] }, "invalid_tools"],
    ["tools[0].parameters", { tools: [{ type: "function", name: "f", parameters: {} }] }, "invalid_tools"],
    ["text.format", { tools: [weather], text: { format: { type: "json_object" } } }, "unsupported_parameter"],
    [
      "text.format.schema.properties.code.pattern",
      { text: { format: { type: "json_schema", name: "x", schema: { type: "object", properties: { code: { type: "string", pattern: "^a" } } } } } },
      "invalid_response_format",
    ],
  ])("refused with a 400 naming %s", (param, body, code) => {
    const e = refusal(body as Record<string, unknown>);
    expect(e).toMatchObject({ param, code });
    expect(e.message.startsWith(`${param}`)).toBe(true);
  });
});

const ECHO: ResponseEcho = {
  instructions: null,
  maxOutputTokens: null,
  metadata: {},
  parallelToolCalls: true,
  temperature: 1,
  topP: 1,
  tools: [],
  toolChoice: "auto",
  format: { type: "text" },
};
const identity = { id: "resp_1", createdAt: 1_700_000_000, model: "alias-1" };
const done = (finishReason: string): Done => ({ finishReason, finishReasons: [finishReason], promptTokens: 11, completionTokens: 5, cachedTokens: 3, fingerprint: "fp" });
const types = (events: ResponseEvent[]) => events.map((e) => e.type);

describe("the fleet's events into a Response and its stream", () => {
  it("text: the message item opened, its deltas, closed, then response.completed with the usage; numbered from 0 without gaps", () => {
    const w = new ResponseWriter(identity, ECHO);
    const events = [...w.start(), ...w.generated("Hel"), ...w.generated("lo"), ...w.done(done("stop"))];
    expect(types(events)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[0]!.response).toMatchObject({ id: "resp_1", object: "response", status: "in_progress", output: [], model: "alias-1", store: false });
    expect(events[0]!.response).not.toHaveProperty("usage");
    expect(events[2]).toMatchObject({ output_index: 0, item: { type: "message", role: "assistant", status: "in_progress", content: [] } });
    const id = (events[2]!.item as { id: string }).id;
    expect(id).toMatch(/^msg_[0-9a-f]{48}$/);
    expect(events[4]).toMatchObject({ item_id: id, output_index: 0, content_index: 0, delta: "Hel", logprobs: [] });
    expect(events[6]).toMatchObject({ item_id: id, text: "Hello" });
    expect(events[8]).toMatchObject({ item: { id, status: "completed", content: [{ type: "output_text", text: "Hello", annotations: [] }] } });
    expect(events[9]!.response).toMatchObject({
      status: "completed",
      completed_at: expect.any(Number),
      output_text: "Hello",
      error: null,
      incomplete_details: null,
      usage: {
        input_tokens: 11,
        input_tokens_details: { cached_tokens: 3, cache_write_tokens: 0 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 16,
      },
    });
  });

  it("function calls: each a function_call item with a call id, its argument deltas, closed when the next opens; pieces of calls never opened dropped", () => {
    const w = new ResponseWriter(identity, ECHO);
    w.start();
    const events = [
      ...w.generated("", [{ index: 0, name: "get_weather", arguments: '{"city":' }]),
      ...w.generated("", [{ index: 0, arguments: '"Paris"}' }]),
      ...w.generated("", [{ index: 5, name: "evil", arguments: "{}" }]), // opens past the next place: dropped
      ...w.generated("", [{ index: 1, name: "get_time", arguments: "{}" }]),
      ...w.done(done("tool_calls")),
    ];
    expect(types(events)).toEqual([
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events[3]).toMatchObject({ name: "get_weather", arguments: '{"city":"Paris"}', output_index: 0 });
    const response = events.at(-1)!.response as { output: { type: string; call_id: string; id: string; status: string; name: string }[] };
    expect(response.output.map((o) => [o.type, o.name, o.status])).toEqual([
      ["function_call", "get_weather", "completed"],
      ["function_call", "get_time", "completed"],
    ]);
    for (const o of response.output) {
      expect(o.call_id).toMatch(/^call_/);
      expect(o.id).toMatch(/^fc_/);
    }
    expect(response.output[0]!.call_id).not.toBe(response.output[1]!.call_id);
  });

  it("text, then a call: the message closed before the call opens", () => {
    const w = new ResponseWriter(identity, ECHO);
    const response = (() => {
      w.generated("Looking.");
      w.generated("", [{ index: 0, name: "f", arguments: "{}" }]);
      return w.final(done("tool_calls"));
    })();
    expect(response.output.map((o) => o.type)).toEqual(["message", "function_call"]);
    expect(response.output_text).toBe("Looking.");
  });

  it("max_output_tokens reached: response.incomplete, the item incomplete, incomplete_details naming the reason", () => {
    const w = new ResponseWriter(identity, ECHO);
    const events = [...w.generated("abc"), ...w.done(done("length"))];
    expect(events.at(-1)!.type).toBe("response.incomplete");
    expect(events.at(-1)!.response).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, output: [{ status: "incomplete" }] });
    expect(events.at(-1)!.response).not.toHaveProperty("completed_at");
  });

  it("nothing generated: an empty message, as OpenAI answers", () => {
    const response = new ResponseWriter(identity, ECHO).final(done("stop"));
    expect(response.output).toMatchObject([{ type: "message", status: "completed", content: [{ type: "output_text", text: "" }] }]);
  });

  it("a failure after the stream began: the error event, then response.failed with what was generated; nothing after", () => {
    const w = new ResponseWriter(identity, ECHO);
    const events = [...w.start(), ...w.generated("partial"), ...w.fail({ code: "agent_lost", message: "the node went away" })];
    expect(types(events).slice(-2)).toEqual(["error", "response.failed"]);
    expect(events.at(-2)).toMatchObject({ code: "agent_lost", message: "the node went away", param: null });
    expect(events.at(-1)!.response).toMatchObject({
      status: "failed",
      error: { code: "server_error", message: "the node went away" },
      output: [{ status: "incomplete", content: [{ text: "partial" }] }],
    });
    expect(w.fail({ code: "x", message: "y" })).toEqual([]);
  });

  it("both ways: a call the writer answered, fed back with its output, is the conversation the fleet's request holds", () => {
    const w = new ResponseWriter(identity, ECHO);
    w.generated("", [{ index: 0, name: "get_weather", arguments: '{"city":"Paris"}' }]);
    const first = w.final(done("tool_calls"));
    const call = first.output[0] as { call_id: string };
    const b = validateResponses({
      model: MODEL,
      input: [{ role: "user", content: "Weather?" }, ...first.output, { type: "function_call_output", call_id: call.call_id, output: "sunny" }],
      tools: [weather],
    });
    expect(b.messages).toEqual([
      { role: "user", content: "Weather?" },
      { role: "assistant", content: "", toolCalls: [{ id: call.call_id, name: "get_weather", arguments: '{"city":"Paris"}' }] },
      { role: "tool", content: "sunny", toolCallId: call.call_id },
    ]);
  });
});

/**
 * The Messages API's translation, both ways, without a fleet: requests into the fleet's request (the
 * conversation, sampling, tools) and the refusals naming their field; the fleet's events into
 * Anthropic's message, stream events and errors, each checked against the schema derived from
 * `@anthropic-ai/sdk`'s types (test/fixtures/anthropic).
 */
import { describe, expect, it } from "vitest";
import { ApiError, InvalidRequestError, PayloadTooLargeError, RateLimitError, ServiceUnavailableError, UpstreamError } from "../../core/errors.js";
import type { CompletionEvent } from "../fleet/index.js";
import { eventViolations, violations } from "../../test/fixtures/anthropic/conformance.js";
import { AnthropicAnswer, anthropicError, endOf, sseText, StopMatcher, validateCountTokens, validateMessages, type End } from "./anthropic.js";

const MODEL = "famB-v3.1";
const weather = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const base = { model: MODEL, max_tokens: 32 };

/** The InvalidRequestError a body is refused with. */
function refusal(body: unknown, validate = validateMessages): InvalidRequestError {
  try {
    validate(body);
  } catch (err) {
    if (err instanceof InvalidRequestError) return err;
    throw err;
  }
  throw new Error("accepted");
}

describe("request → the fleet's request", () => {
  it("a Claude-style conversation: system blocks, a tool_use answered by tool_results (a string, text blocks, is_error), then text", () => {
    const a = validateMessages({
      ...base,
      system: [
        { type: "text", text: "You are terse.", cache_control: { type: "ephemeral" } },
        { type: "text", text: "Use tools." },
      ],
      messages: [
        { role: "user", content: "Weather in Paris and Rome?" },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Looking." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_2", name: "get_weather", input: { city: "Rome" }, caller: { type: "direct" } },
          ],
        },
        {
          role: "user",
          content: [
            {
              type: "tool_result",
              tool_use_id: "toolu_2",
              content: [
                { type: "text", text: "sunny" },
                { type: "text", text: "21 C" },
              ],
            },
            { type: "tool_result", tool_use_id: "toolu_1", content: "no data", is_error: true },
            { type: "text", text: "And tomorrow?" },
          ],
        },
      ],
      tools: [weather],
      tool_choice: { type: "auto", disable_parallel_tool_use: true },
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ["END"],
      metadata: { user_id: "u-1" },
      stream: true,
    });
    expect(a.request).toEqual({
      model: MODEL,
      maxTokens: 32,
      temperature: 0.5,
      sampling: { topP: 0.9, topK: 40, stop: ["END"] },
      nameStop: true,
      messages: [
        { role: "system", content: "You are terse.\n\nUse tools." },
        { role: "user", content: "Weather in Paris and Rome?" },
        {
          role: "assistant",
          content: "Looking.",
          toolCalls: [
            { id: "toolu_1", name: "get_weather", arguments: '{"city":"Paris"}' },
            { id: "toolu_2", name: "get_weather", arguments: '{"city":"Rome"}' },
          ],
        },
        { role: "tool", toolCallId: "toolu_2", content: "sunny\n\n21 C" },
        { role: "tool", toolCallId: "toolu_1", content: "Error: no data" },
        { role: "user", content: "And tomorrow?" },
      ],
      tools: [{ name: "get_weather", description: "The weather in a city", parameters: weather.input_schema }],
      parallelToolCalls: false,
    });
    // the node stops at the stop sequences and names the one it met (nameStop: only nodes that do); the scheduler matches them too
    expect(a).toMatchObject({ requestedModel: MODEL, stream: true, stopSequences: ["END"], ignored: ["metadata"] });
  });

  it("tool_choice: any is required, tool names the function, none shows no tools", () => {
    const conversation = { ...base, messages: [{ role: "user", content: "hi" }], tools: [weather] };
    expect(validateMessages({ ...conversation, tool_choice: { type: "any" } }).request.toolChoice).toBe("required");
    expect(validateMessages({ ...conversation, tool_choice: { type: "tool", name: "get_weather" } }).request.toolChoice).toEqual({ name: "get_weather" });
    const none = validateMessages({ ...conversation, tool_choice: { type: "none" } }).request;
    expect(none.tools).toBeUndefined();
    expect(none.toolChoice).toBeUndefined();
    expect(validateMessages(conversation).request).toMatchObject({ tools: [{ name: "get_weather" }] });
    expect(validateMessages(conversation).request.toolChoice).toBeUndefined();
  });

  it("consecutive turns of one role are combined into one, as Anthropic combines them; a system message joins the system prompt", () => {
    const a = validateMessages({
      ...base,
      system: "S1",
      messages: [
        { role: "system", content: "S2" },
        { role: "user", content: "a" },
        { role: "user", content: [{ type: "text", text: "b" }] },
        { role: "assistant", content: "c" },
        { role: "assistant", content: "d" },
      ],
    });
    expect(a.request.messages).toEqual([
      { role: "system", content: "S1\n\nS2" },
      { role: "user", content: "a\n\nb" },
      { role: "assistant", content: "c\n\nd" },
    ]);
  });

  it("count_tokens: the same conversation, evaluated for one greedy token", () => {
    const a = validateCountTokens({ model: MODEL, system: "s", messages: [{ role: "user", content: "hi" }], tools: [weather], tool_choice: { type: "any" } });
    expect(a.request).toEqual({
      model: MODEL,
      maxTokens: 1,
      temperature: 0,
      messages: [
        { role: "system", content: "s" },
        { role: "user", content: "hi" },
      ],
      tools: [{ name: "get_weather", description: "The weather in a city", parameters: weather.input_schema }],
      toolChoice: "required",
    });
  });

  const user = (content: unknown) => ({ ...base, messages: [{ role: "user", content }] });
  const afterCall = (answer: unknown[]) => ({
    ...base,
    messages: [
      { role: "user", content: "q" },
      { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: answer },
    ],
  });
  it("names a block type that is an Object property (constructor) as any unknown type, not with Object's own function", () => {
    const err = refusal(user([{ type: "constructor" }]));
    expect(err.message).toMatch(/^messages\[0\]\.content\[0\]: blocks of type "constructor" are not supported here: /);
    expect(err.message).not.toMatch(/function|native code/);
  });

  it.each([
    [
      "an image block",
      user([
        { type: "text", text: "x" },
        { type: "image", source: {} },
      ]),
      "messages[0].content[1]",
      "unsupported_content",
    ],
    ["a document block", user([{ type: "document", source: {} }]), "messages[0].content[0]", "unsupported_content"],
    [
      "a thinking block",
      { ...base, messages: [{ role: "assistant", content: [{ type: "thinking", thinking: "", signature: "" }] }] },
      "messages[0].content[0]",
      "unsupported_content",
    ],
    ["a tool_use in a user message", user([{ type: "tool_use", id: "t", name: "f", input: {} }]), "messages[0].content[0]", "unsupported_content"],
    [
      "an image in a tool_result",
      afterCall([{ type: "tool_result", tool_use_id: "t1", content: [{ type: "image", source: {} }] }]),
      "messages[2].content[0].content[0]",
      "unsupported_content",
    ],
    ["thinking enabled", { ...user("x"), thinking: { type: "enabled", budget_tokens: 2048 } }, "thinking", "unsupported_parameter"],
    ["adaptive thinking", { ...user("x"), thinking: { type: "adaptive" } }, "thinking", "unsupported_parameter"],
    ["a server tool", { ...user("x"), tools: [{ type: "web_search_20250305", name: "web_search" }] }, "tools[0].type", "unsupported_parameter"],
    ["a container", { ...user("x"), container: "c-1" }, "container", "unsupported_parameter"],
    ["MCP servers", { ...user("x"), mcp_servers: [{ type: "url", url: "https://x", name: "x" }] }, "mcp_servers", "unsupported_parameter"],
    ["service_tier priority", { ...user("x"), service_tier: "priority" }, "service_tier", "unsupported_parameter"],
    ["output_config", { ...user("x"), output_config: { effort: "low" } }, "output_config", "unsupported_parameter"],
    ["speed fast", { ...user("x"), speed: "fast" }, "speed", "unsupported_parameter"],
    ["an unknown member", { ...user("x"), frequency_penalty: 1 }, "frequency_penalty", "unsupported_parameter"],
    ["an unknown block member", user([{ type: "text", text: "x", extra: 1 }]), "messages[0].content[0].extra", "unsupported_parameter"],
    ["citations", user([{ type: "text", text: "x", citations: [] }]), "messages[0].content[0].citations", "unsupported_parameter"],
    ["a metadata member other than user_id", { ...user("x"), metadata: { tenant: "a" } }, "metadata.tenant", "unsupported_parameter"],
    ["deferred tools", { ...user("x"), tools: [{ ...weather, defer_loading: true }] }, "tools[0].defer_loading", "unsupported_parameter"],
    ["temperature above Anthropic's 1", { ...user("x"), temperature: 1.5 }, "temperature", "invalid_temperature"],
    ["no max_tokens", { model: MODEL, messages: [{ role: "user", content: "x" }] }, "max_tokens", "missing_required_field"],
    ["max_tokens 0 (pre-warming a cache)", { ...user("x"), max_tokens: 0 }, "max_tokens", "invalid_max_tokens"],
    ["17 stop sequences", { ...user("x"), stop_sequences: Array.from({ length: 17 }, (_, i) => `s${i}`) }, "stop_sequences", "invalid_stop_sequences"],
    ["an empty stop sequence", { ...user("x"), stop_sequences: [""] }, "stop_sequences[0]", "invalid_stop_sequences"],
    ["a tool role", { ...base, messages: [{ role: "tool", content: "x" }] }, "messages[0].role", "invalid_role"],
    ["no messages", { ...base, messages: [] }, "messages", "invalid_messages"],
    ["a tool_result with no tool_use before it", user([{ type: "tool_result", tool_use_id: "t9", content: "x" }]), "messages[0].content[0].tool_use_id", "invalid_messages"],
    ["a tool_use left unanswered", afterCall([{ type: "text", text: "never mind" }]), "messages[2].content", "invalid_messages"],
    [
      "a tool_result after text",
      afterCall([
        { type: "text", text: "x" },
        { type: "tool_result", tool_use_id: "t1", content: "x" },
      ]),
      "messages[2].content[1]",
      "invalid_messages",
    ],
    [
      "a tool_use answered twice",
      afterCall([
        { type: "tool_result", tool_use_id: "t1", content: "x" },
        { type: "tool_result", tool_use_id: "t1", content: "y" },
      ]),
      "messages[2].content[1].tool_use_id",
      "invalid_messages",
    ],
    [
      "an assistant turn after a tool_use",
      {
        ...base,
        messages: [
          { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: {} }] },
          { role: "assistant", content: "x" },
        ],
      },
      "messages[1].role",
      "invalid_messages",
    ],
    [
      "a tool_use ending the conversation",
      { ...base, messages: [{ role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: {} }] }] },
      "messages[0].content",
      "invalid_messages",
    ],
    [
      "a tool_use input that is not an object",
      { ...base, messages: [{ role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: [1] }] }] },
      "messages[0].content[0].input",
      "invalid_type",
    ],
    ["tool_choice naming no tool", { ...user("x"), tools: [weather], tool_choice: { type: "tool", name: "get_time" } }, "tool_choice.name", "invalid_tool_choice"],
    ["tool_choice any without tools", { ...user("x"), tool_choice: { type: "any" } }, "tool_choice", "invalid_tool_choice"],
    ["a tool_choice type", { ...user("x"), tool_choice: { type: "required" } }, "tool_choice.type", "invalid_tool_choice"],
    ["two tools of one name", { ...user("x"), tools: [weather, weather] }, "tools[1].name", "invalid_tools"],
    ["an input_schema that is not an object's", { ...user("x"), tools: [{ name: "f", input_schema: { type: "string" } }] }, "tools[0].input_schema.type", "invalid_tools"],
    [
      "a keyword the grammar cannot hold",
      { ...user("x"), tools: [{ name: "f", input_schema: { type: "object", properties: { a: { type: "string", pattern: "^a" } } } }] },
      "tools[0].input_schema.properties.a.pattern",
      "invalid_tools",
    ],
  ])("refuses %s with a 400 naming %s", (_what, body, param, code) => {
    const err = refusal(body);
    expect(err.toBody().error).toMatchObject({ param, code });
    expect(err.message.startsWith(`${param}:`)).toBe(true);
  });

  it("refuses a model no catalog names, and count_tokens refuses generation's fields", () => {
    expect(refusal({ ...base, model: "claude-sonnet-4-5", messages: [{ role: "user", content: "x" }] }).toBody().error).toMatchObject({ code: "model_not_found", param: "model" });
    for (const field of ["max_tokens", "stream", "temperature", "stop_sequences"])
      expect(refusal({ model: MODEL, messages: [{ role: "user", content: "x" }], [field]: 1 }, validateCountTokens).toBody().error).toMatchObject({
        code: "unsupported_parameter",
        param: field,
      });
  });
});

const text = (t: string, toolCalls?: { index: number; name?: string; arguments: string }[]): CompletionEvent => ({
  type: "text",
  index: 0,
  text: t,
  ...(toolCalls ? { toolCalls } : {}),
});
const done = (finishReason: string) => ({
  type: "done" as const,
  finishReason,
  finishReasons: [finishReason],
  promptTokens: 20,
  completionTokens: 7,
  cachedTokens: 12,
  fingerprint: "",
});

/** The message Anthropic's SDK builds from stream events (as its MessageStream accumulates them). */
function accumulate(events: { event: string; data: Record<string, any> }[]) {
  let message: Record<string, any> | undefined;
  for (const { data } of events) {
    if (data.type === "message_start") message = structuredClone(data.message);
    else if (data.type === "content_block_start") message!.content.push({ ...data.content_block, ...(data.content_block.type === "tool_use" ? { json: "" } : {}) });
    else if (data.type === "content_block_delta") {
      const block = message!.content[data.index];
      if (data.delta.type === "text_delta") block.text += data.delta.text;
      else block.json += data.delta.partial_json;
    } else if (data.type === "content_block_stop") {
      const block = message!.content[data.index];
      if (block.type === "tool_use") {
        block.input = JSON.parse(block.json || "{}");
        delete block.json;
      }
    } else if (data.type === "message_delta") {
      Object.assign(message!, { stop_reason: data.delta.stop_reason, stop_sequence: data.delta.stop_sequence });
      Object.assign(message!.usage, data.usage);
    }
  }
  return message!;
}

describe("the fleet's events → Anthropic's answer", () => {
  const events = [
    text("Let me "),
    text("check.", [{ index: 0, name: "get_weather", arguments: '{"ci' }]),
    text("", [{ index: 0, arguments: 'ty":"Paris"}' }]),
    text("", [{ index: 1, name: "get_weather", arguments: "{}" }]),
  ];

  it("a message: text, then a tool_use per call with its input parsed; stop_reason tool_use; the prompt split into cached and not", () => {
    const answer = new AnthropicAnswer("alias-1", [], false);
    for (const e of events) answer.push(e);
    const message = answer.message(endOf(done("tool_calls")));
    expect(message).toMatchObject({
      id: expect.stringMatching(/^msg_[\w-]{24}$/),
      type: "message",
      role: "assistant",
      model: "alias-1",
      content: [
        { type: "text", text: "Let me check.", citations: null },
        { type: "tool_use", id: expect.stringMatching(/^toolu_[\w-]{24}$/), name: "get_weather", input: { city: "Paris" }, caller: { type: "direct" } },
        { type: "tool_use", name: "get_weather", input: {} },
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 8, cache_read_input_tokens: 12, cache_creation_input_tokens: 0, output_tokens: 7 },
    });
    expect(violations("Message", message)).toEqual([]);
  });

  it("streamed: message_start, ping, each block started, its deltas, stopped before the next; message_delta with the reason and usage; message_stop — each event conforming, and accumulating to the message", () => {
    const answer = new AnthropicAnswer("alias-1", [], true);
    const out = [...answer.start(), ...events.flatMap((e) => answer.push(e)), ...answer.finish(endOf(done("tool_calls")))];
    expect(out.map((e) => (e.event === "content_block_delta" ? `${e.event}:${(e.data.delta as { type: string }).type}` : e.event))).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta:text_delta",
      "content_block_delta:text_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta:input_json_delta",
      "content_block_delta:input_json_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta:input_json_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    for (const e of out) expect(eventViolations(e.event, e.data), e.event).toEqual([]);
    expect(out.filter((e) => e.event === "content_block_start").map((e) => e.data.index)).toEqual([0, 1, 2]);
    expect(out.at(-2)!.data).toMatchObject({ delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { input_tokens: 8, output_tokens: 7, cache_read_input_tokens: 12 } });
    const whole = new AnthropicAnswer("alias-1", [], false);
    for (const e of events) whole.push(e);
    const { id: _a, content, ...rest } = whole.message(endOf(done("tool_calls")));
    const built = accumulate(out);
    expect(built.content.map((b: { id?: string }) => ({ ...b, id: b.id && "id" }))).toEqual(content.map((b) => ({ ...b, id: (b as { id?: string }).id && "id" })));
    expect({ ...built, id: undefined, content: undefined }).toEqual({ ...rest, id: undefined, content: undefined });
    expect(sseText(out.slice(0, 1))).toMatch(/^event: message_start\ndata: \{"type":"message_start",/);
  });

  it("max_tokens, end_turn; an empty reply has no blocks", () => {
    const cut = new AnthropicAnswer("m", [], false);
    cut.push(text("abc"));
    expect(cut.message(endOf(done("length")))).toMatchObject({ stop_reason: "max_tokens", content: [{ type: "text", text: "abc" }] });
    const empty = new AnthropicAnswer("m", [], true);
    const out = [...empty.start(), ...empty.finish(endOf(done("stop")))];
    expect(out.map((e) => e.event)).toEqual(["message_start", "ping", "message_delta", "message_stop"]);
    expect(out[2]!.data).toMatchObject({ delta: { stop_reason: "end_turn" } });
  });

  it("a stop sequence ends the reply at its first appearance, across events, never part of the text; later events add nothing", () => {
    const answer = new AnthropicAnswer("m", ["</b>", "STOP"], true);
    const out = [...answer.start(), ...answer.push(text("one </")), ...answer.push(text("x> two ST")), ...answer.push(text("OP three"))];
    expect(answer.stopped).toBe("STOP");
    expect(answer.push(text("more", [{ index: 0, name: "get_weather", arguments: "{}" }]))).toEqual([]);
    const end: End = { stopReason: "stop_sequence", stopSequence: "STOP", promptTokens: 5, completionTokens: 9, cachedTokens: 0 };
    const all = [...out, ...answer.finish(end)];
    const built = accumulate(all);
    expect(built.content).toEqual([{ type: "text", text: "one </x> two ", citations: null }]);
    expect(built).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: "STOP", usage: { input_tokens: 5, output_tokens: 9 } });
    for (const e of all) expect(eventViolations(e.event, e.data)).toEqual([]);
  });

  it("StopMatcher: holds back what could begin a stop sequence, releases it once it cannot; the one completed first wins; flush gives back the rest", () => {
    const m = new StopMatcher(["abcd", "bc"]);
    expect(m.push("xxab")).toEqual({ text: "xx" });
    expect(m.push("c")).toEqual({ text: "a", stop: "bc" });
    const n = new StopMatcher(["END"]);
    expect(n.push("the EN")).toEqual({ text: "the " });
    expect(n.push("Dless")).toEqual({ text: "ENDless".slice(0, 0), stop: "END" });
    const o = new StopMatcher(["END"]);
    expect(o.push("E")).toEqual({ text: "" });
    expect(o.push("x E")).toEqual({ text: "Ex " });
    expect(o.flush()).toBe("E");
    expect(new StopMatcher([]).push("anything")).toEqual({ text: "anything" });
  });

  it("text held back for a stop sequence is released before a call begins, and at the end", () => {
    const answer = new AnthropicAnswer("m", ["STOP"], false);
    answer.push(text("go ST", [{ index: 0, name: "f", arguments: "{}" }]));
    expect(answer.message(endOf(done("tool_calls"))).content).toMatchObject([
      { type: "text", text: "go ST" },
      { type: "tool_use", name: "f" },
    ]);
    const tail = new AnthropicAnswer("m", ["STOP"], false);
    tail.push(text("so ST"));
    expect(tail.message(endOf(done("stop"))).content).toEqual([{ type: "text", text: "so ST", citations: null }]);
  });

  it("a node's pieces that do not fit: a call never started is dropped; streamed, a piece of a call after the next block began fails the answer", () => {
    const answer = new AnthropicAnswer("m", [], true);
    expect(answer.push(text("", [{ index: 3, name: "f", arguments: "{}" }]))).toEqual([]);
    answer.push(text("", [{ index: 0, name: "f", arguments: "{" }]));
    answer.push(text("words"));
    expect(() => answer.push(text("", [{ index: 0, arguments: "}" }]))).toThrow(expect.objectContaining({ code: "agent_error" }) as Error);
  });
});

describe("errors in Anthropic's shape", () => {
  it.each([
    [new InvalidRequestError("invalid_temperature", "temperature: expected …"), 400, "invalid_request_error"],
    [new InvalidRequestError("model_not_found", "model: …"), 404, "not_found_error"],
    [new ApiError(401, "authentication_error", "invalid_api_key", "x-api-key: …"), 401, "authentication_error"],
    [new ApiError(403, "permission_error", "tier_too_low", "…"), 403, "permission_error"],
    [new PayloadTooLargeError("request_too_large", "body: larger than …"), 413, "request_too_large"],
    [new RateLimitError("…", 7), 429, "rate_limit_error"],
    [new ServiceUnavailableError("queue_full", "…"), 529, "overloaded_error"],
    [new UpstreamError("agent_lost", "…"), 500, "api_error"],
    [new ApiError(500, "server_error", "internal_error", "…"), 500, "api_error"],
  ])("%s → %i %s, conforming", (err, status, type) => {
    const answer = anthropicError(err, "req-1");
    expect(answer.status).toBe(status);
    expect(answer.body).toEqual({ type: "error", error: { type, message: err.message }, request_id: "req-1" });
    expect(answer.headers["x-kiln-error-code"]).toBe(err.code);
    expect(violations("ErrorResponse", answer.body)).toEqual([]);
  });

  it("keeps the error's headers (Retry-After) and tells the SDK whether to retry", () => {
    expect(anthropicError(new RateLimitError("…", 7), null).headers).toMatchObject({ "Retry-After": "7", "x-should-retry": "true" });
    expect(anthropicError(new InvalidRequestError("invalid_messages", "…"), null).headers).toMatchObject({ "x-should-retry": "false" });
  });
});

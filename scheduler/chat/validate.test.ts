/** Chat completion bodies: what is accepted as given, and every refusal's code and message (field first). */
import { describe, expect, it } from "vitest";
import { validateEmbeddings } from "./embeddings.js";
import { validateLegacyCompletion } from "./legacy.js";
import type { ModelNames } from "./schema.js";
import { validateChatCompletion } from "./validate.js";

const MODEL = "famB-v3.1";
const base = { model: MODEL, messages: [{ role: "user", content: "hi" }] };

describe("validateChatCompletion", () => {
  it("accepts the minimum and fills the defaults", () => {
    expect(validateChatCompletion(base)).toEqual({
      model: MODEL,
      requestedModel: MODEL,
      messages: [{ role: "user", content: "hi" }],
      stream: false,
      includeUsage: false,
      ignored: [],
    });
    expect(validateChatCompletion(base, { defaultMaxTokens: 64 }).maxTokens).toBe(64);
  });

  it("keeps every role's messages in order, developer as system, content parts joined", () => {
    const messages = [
      { role: "developer", content: "d" },
      { role: "system", content: "s" },
      {
        role: "user",
        content: [
          { type: "text", text: "u1 " },
          { type: "text", text: "u2" },
        ],
      },
      { role: "assistant", content: "" },
    ];
    expect(validateChatCompletion({ ...base, messages }).messages).toEqual([
      { role: "system", content: "d" },
      { role: "system", content: "s" },
      { role: "user", content: "u1 u2" },
      { role: "assistant", content: "" },
    ]);
  });

  it("takes every sampling field as given, stop as a list, max_completion_tokens as max_tokens", () => {
    const body = {
      ...base,
      max_completion_tokens: 7,
      top_p: 0.5,
      top_k: 40,
      min_p: 0.05,
      seed: 4294967295,
      presence_penalty: -2,
      frequency_penalty: 2,
      repeat_penalty: 1.1,
      logit_bias: { "0": -100, "50256": 100 },
      stop: "\n",
    };
    expect(validateChatCompletion(body)).toMatchObject({
      maxTokens: 7,
      sampling: {
        topP: 0.5,
        topK: 40,
        minP: 0.05,
        seed: 4294967295,
        presencePenalty: -2,
        frequencyPenalty: 2,
        repeatPenalty: 1.1,
        logitBias: { "0": -100, "50256": 100 },
        stop: ["\n"],
      },
    });
    expect(validateChatCompletion({ ...base, max_tokens: 9, max_completion_tokens: 9, stop: ["a", "b", "c", "d"] })).toMatchObject({
      maxTokens: 9,
      sampling: { stop: ["a", "b", "c", "d"] },
    });
    expect(
      validateChatCompletion({ ...base, stop: [], logit_bias: {}, n: 1, logprobs: false, response_format: { type: "text" }, tools: [], tool_choice: "none", store: false }),
    ).not.toHaveProperty("sampling");
    expect(validateChatCompletion({ ...base, logprobs: true }, { defaultMaxTokens: 1024 }).logprobs).toBe(0);
    expect(validateChatCompletion({ ...base, logprobs: true, top_logprobs: 20, max_tokens: 100 }).logprobs).toBe(20);
    expect(validateChatCompletion({ ...base, logprobs: false })).not.toHaveProperty("logprobs");
    expect(validateChatCompletion({ ...base, n: 3 }).n).toBe(3);
    expect(validateChatCompletion({ ...base, n: 1 })).not.toHaveProperty("n");
  });

  it("takes response_format: json_object, json_schema with its schema (a json_schema without one is any JSON object), text as free text", () => {
    const schema = { type: "object", properties: { a: { type: "string" } } };
    expect(validateChatCompletion({ ...base, response_format: { type: "json_object" } }).responseFormat).toEqual({ type: "json_object" });
    expect(validateChatCompletion({ ...base, response_format: { type: "json_schema", json_schema: { name: "a", schema, strict: true } } }).responseFormat).toEqual({
      type: "json_schema",
      schema,
    });
    expect(validateChatCompletion({ ...base, response_format: { type: "json_schema", json_schema: { name: "a" } } }).responseFormat).toEqual({ type: "json_object" });
    expect(validateChatCompletion({ ...base, response_format: { type: "text" } })).not.toHaveProperty("responseFormat");
  });

  it("streams any number of log probabilities: the scheduler holds none of them", () => {
    expect(validateChatCompletion({ ...base, logprobs: true, top_logprobs: 20, stream: true }).logprobs).toBe(20);
  });

  it("gives a participant's name to the model as the start of its message's text", () => {
    expect(
      validateChatCompletion({
        ...base,
        messages: [
          { role: "user", content: "hi", name: "ann" },
          { role: "user", content: [{ type: "text", text: "yo" }], name: "bob_2" },
        ],
      }).messages,
    ).toEqual([
      { role: "user", content: "ann: hi" },
      { role: "user", content: "bob_2: yo" },
    ]);
    // not on the assistant's own turns: a prefill would be continued after the name
    expect(
      validateChatCompletion({
        ...base,
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: "Once", name: "bot" },
        ],
      }).messages[1],
    ).toEqual({ role: "assistant", content: "Once" });
  });

  it("lists unknown members and OpenAI's metadata members as ignored, in the order sent", () => {
    expect(validateChatCompletion({ ...base, future_field: 1, user: "u-1", temperature: 1 }).ignored).toEqual(["future_field", "user"]);
  });

  it("takes max_tokens, temperature (0 and 2 included), stream and include_usage as given", () => {
    expect(validateChatCompletion({ ...base, max_tokens: 1, temperature: 0, stream: true, stream_options: { include_usage: true } })).toEqual({
      ...base,
      requestedModel: MODEL,
      maxTokens: 1,
      temperature: 0,
      stream: true,
      includeUsage: true,
      ignored: [],
    });
    expect(validateChatCompletion({ ...base, temperature: 2, stream: false, stream_options: { include_usage: false } })).toMatchObject({
      temperature: 2,
      stream: false,
      includeUsage: false,
    });
    expect(validateChatCompletion({ ...base, max_tokens: null, temperature: null, stream: null, stream_options: null })).toEqual({
      ...base,
      requestedModel: MODEL,
      stream: false,
      includeUsage: false,
      ignored: [],
    });
    expect(validateChatCompletion({ ...base, stream_options: {} }).includeUsage).toBe(false);
    expect(validateChatCompletion({ ...base, stream_options: { include_usage: null } }).includeUsage).toBe(false);
  });

  it("accepts unknown members", () => {
    expect(validateChatCompletion({ ...base, future_field: 1 })).toEqual({ ...validateChatCompletion(base), ignored: ["future_field"] });
  });

  it.each([
    [null, "invalid_type", "body: expected a JSON object, got null"],
    [[], "invalid_type", "body: expected a JSON object, got array"],
    ["x", "invalid_type", "body: expected a JSON object, got string"],
    [{ messages: base.messages }, "missing_required_field", "model: is required"],
    [{ model: null, messages: base.messages }, "missing_required_field", "model: is required"],
    [{ model: 5, messages: base.messages }, "invalid_type", "model: expected a string, got number"],
    [{ model: "gpt-9", messages: base.messages }, "model_not_found", 'model: "gpt-9" is not a model of this service (see GET /v1/models)'],
    [{ model: MODEL }, "missing_required_field", "messages: is required"],
    [{ model: MODEL, messages: null }, "missing_required_field", "messages: is required"],
    [{ model: MODEL, messages: {} }, "invalid_type", "messages: expected an array of messages, got object"],
    [{ model: MODEL, messages: [] }, "invalid_messages", "messages: expected at least one message, got 0 items"],
    [{ model: MODEL, messages: ["hi"] }, "invalid_type", "messages[0]: expected an object with role and content, got string"],
    [{ model: MODEL, messages: [null] }, "invalid_type", "messages[0]: expected an object with role and content, got null"],
    [{ model: MODEL, messages: [[]] }, "invalid_type", "messages[0]: expected an object with role and content, got array"],
    [{ model: MODEL, messages: [{ role: "user", content: "a" }, { content: "b" }] }, "missing_required_field", "messages[1].role: is required"],
    [{ model: MODEL, messages: [{ role: null, content: "b" }] }, "missing_required_field", "messages[0].role: is required"],
    [{ model: MODEL, messages: [{ role: 1, content: "b" }] }, "invalid_type", "messages[0].role: expected one of system, user, assistant, developer, tool, got number"],
    [{ model: MODEL, messages: [{ role: "robot", content: "b" }] }, "invalid_role", 'messages[0].role: expected one of system, user, assistant, developer, tool, got "robot"'],
    [{ model: MODEL, messages: [{ role: "tool", content: "b" }] }, "missing_required_field", "messages[0].tool_call_id: is required in a tool message"],
    [
      { model: MODEL, messages: [{ role: "function", name: "f", content: "b" }] },
      "unsupported_parameter",
      'messages[0].role: "function" messages (deprecated function calling) are not supported; use tools and "tool" messages',
    ],
    [
      { model: MODEL, messages: [{ role: "user", content: "b", name: "ann lee" }] },
      "invalid_name",
      'messages[0].name: expected a name of 1 to 64 letters, digits, _ or -, got "ann lee"',
    ],
    [{ model: MODEL, messages: [{ role: "user", content: "b", name: 5 }] }, "invalid_type", "messages[0].name: expected a name of 1 to 64 letters, digits, _ or -, got number"],
    [
      { model: MODEL, messages: [{ role: "assistant", content: null, tool_calls: [] }] },
      "missing_required_field",
      "messages[0].content: is required (it may be null only in an assistant message with tool_calls)",
    ],
    [
      {
        model: MODEL,
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "a" },
              { type: "image_url", image_url: { url: "http://x" } },
            ],
          },
        ],
      },
      "unsupported_content",
      'messages[0].content[1]: content parts of type "image_url" are not supported; only "text"',
    ],
    [{ model: MODEL, messages: [{ role: "user", content: [{ type: "text", text: 5 }] }] }, "invalid_type", "messages[0].content[0].text: expected a string, got number"],
    [{ ...base, n: 17 }, "invalid_n", "n: expected an integer from 1 to 16, got 17"],
    [{ ...base, n: 0 }, "invalid_n", "n: expected an integer from 1 to 16, got 0"],
    [{ ...base, top_logprobs: 2 }, "invalid_top_logprobs", "top_logprobs: needs logprobs: true"],
    [
      { ...base, logprobs: true, top_logprobs: 20, n: 16, max_tokens: 300 },
      "invalid_logprobs",
      "logprobs: 100800 log probabilities (choices × max_tokens × (1 + alternatives)) are more than a non-streamed answer holds (100000); stream it, or set a lower max_tokens",
    ],
    [
      { ...base, logprobs: true, top_logprobs: 20, max_tokens: 5000 },
      "invalid_logprobs",
      "logprobs: 105000 log probabilities (choices × max_tokens × (1 + alternatives)) are more than a non-streamed answer holds (100000); stream it, or set a lower max_tokens",
    ],
    [
      { ...base, logprobs: true },
      "invalid_logprobs",
      "logprobs: unbounded log probabilities (choices × max_tokens × (1 + alternatives)) are more than a non-streamed answer holds (100000); stream it, or set a lower max_tokens",
    ],
    [{ ...base, logprobs: true, top_logprobs: 21 }, "invalid_top_logprobs", "top_logprobs: expected an integer from 0 to 20, got 21"],
    [{ ...base, logprobs: "yes" }, "invalid_type", "logprobs: expected a boolean, got string"],
    [{ ...base, response_format: { type: "yaml" } }, "invalid_response_format", 'response_format.type: expected one of text, json_object, json_schema, got "yaml"'],
    [{ ...base, response_format: { type: "json_schema" } }, "missing_required_field", "response_format.json_schema: is required with type json_schema"],
    [
      { ...base, response_format: { type: "json_schema", json_schema: { name: "a b", schema: {} } } },
      "invalid_name",
      'response_format.json_schema.name: expected a name of 1 to 64 letters, digits, _ or -, got "a b"',
    ],
    [
      { ...base, response_format: { type: "json_schema", json_schema: { name: "a", schema: { type: "object", properties: { x: { type: "string", pattern: "a" } } } } } },
      "invalid_response_format",
      "response_format.json_schema.schema.properties.x.pattern: this keyword is not supported by structured output (the grammar could not hold the output to it)",
    ],
    [
      { ...base, response_format: { type: "json_schema", json_schema: { name: "a", schema: { type: "array", minItems: 100000 } } } },
      "invalid_response_format",
      "response_format.json_schema.schema.minItems: expected an integer from 0 to 256",
    ],
    [
      { ...base, response_format: { type: "json_schema", json_schema: { name: "a", schema: { $ref: "#/$defs/nope" } } } },
      "invalid_response_format",
      "response_format.json_schema.schema.$ref: expected #/$defs/<name> of a definition in this schema's $defs",
    ],
    [
      { ...base, response_format: { type: "json_schema", json_schema: { name: "a", schema: { anyOf: [{ type: "wat" }] } } } },
      "invalid_response_format",
      "response_format.json_schema.schema.anyOf[0].type: expected one or more of string, number, integer, boolean, null, object, array",
    ],
    [{ ...base, tool_choice: "required" }, "invalid_tool_choice", 'tool_choice: "required" needs tools'],
    [{ ...base, store: true }, "unsupported_parameter", "store: completions are not stored by this service"],
    [{ ...base, audio: { voice: "x" } }, "unsupported_parameter", "audio: not supported by this service"],
    [{ ...base, modalities: ["text", "audio"] }, "unsupported_parameter", "modalities: only text output is supported"],
    [{ ...base, modalities: "audio" }, "invalid_type", "modalities: expected an array, got string"],
    [{ model: "m".repeat(1000), messages: base.messages }, "model_not_found", `model: "${"m".repeat(40)}…" (1000 characters) is not a model of this service (see GET /v1/models)`],
    [{ ...base, max_completion_tokens: 0 }, "invalid_max_completion_tokens", "max_completion_tokens: expected an integer of at least 1, got 0"],
    [{ ...base, max_tokens: 5, max_completion_tokens: 6 }, "invalid_max_tokens", "max_completion_tokens: 6 differs from max_tokens 5; send one"],
    [{ ...base, top_p: 1.5 }, "invalid_top_p", "top_p: expected a number from 0 to 1, got 1.5"],
    [{ ...base, top_k: -1 }, "invalid_top_k", "top_k: expected an integer from 0 to 2147483647, got -1"],
    [{ ...base, seed: 1.5 }, "invalid_seed", "seed: expected an integer from 0 to 4294967295, got 1.5"],
    [{ ...base, seed: -1 }, "invalid_seed", "seed: expected an integer from 0 to 4294967295, got -1"],
    [{ ...base, seed: 2 ** 32 }, "invalid_seed", "seed: expected an integer from 0 to 4294967295, got 4294967296"],
    [{ ...base, top_k: 2 ** 32 + 5 }, "invalid_top_k", "top_k: expected an integer from 0 to 2147483647, got 4294967301"],
    [{ ...base, repeat_penalty: 0 }, "invalid_repeat_penalty", "repeat_penalty: expected a number above 0 and at most 10, got 0"],
    [{ ...base, presence_penalty: 2.5 }, "invalid_presence_penalty", "presence_penalty: expected a number from -2 to 2, got 2.5"],
    [{ ...base, frequency_penalty: "1" }, "invalid_type", "frequency_penalty: expected a number from -2 to 2, got string"],
    [{ ...base, stop: ["a", "b", "c", "d", "e"] }, "invalid_stop", "stop: expected at most 4 sequences, got 5 items"],
    [{ ...base, stop: [""] }, "invalid_stop", 'stop[0]: expected a string of 1 to 256 characters, got ""'],
    [{ ...base, stop: 5 }, "invalid_type", "stop: expected a string or an array of strings, got number"],
    [{ ...base, logit_bias: { "-1": 5 } }, "invalid_logit_bias", 'logit_bias: expected keys that are a token id, got "-1"'],
    [{ ...base, logit_bias: { "12": 101 } }, "invalid_logit_bias", "logit_bias.12: expected a number from -100 to 100, got 101"],
    [{ ...base, logit_bias: [1] }, "invalid_type", "logit_bias: expected an object of token ids to numbers, got array"],
    [{ model: MODEL, messages: [{ role: "user" }] }, "missing_required_field", "messages[0].content: is required (it may be null only in an assistant message with tool_calls)"],
    [
      { model: MODEL, messages: [{ role: "user", content: null }] },
      "missing_required_field",
      "messages[0].content: is required (it may be null only in an assistant message with tool_calls)",
    ],
    [{ model: MODEL, messages: [{ role: "user", content: 3 }] }, "invalid_type", "messages[0].content: expected a string or an array of content parts, got number"],
    [{ ...base, max_tokens: 0 }, "invalid_max_tokens", "max_tokens: expected an integer of at least 1, got 0"],
    [{ ...base, max_tokens: 1.5 }, "invalid_max_tokens", "max_tokens: expected an integer of at least 1, got 1.5"],
    [{ ...base, max_tokens: "5" }, "invalid_type", "max_tokens: expected an integer of at least 1, got string"],
    [{ ...base, temperature: "1" }, "invalid_type", "temperature: expected a number from 0 to 2, got string"],
    [{ ...base, temperature: Infinity }, "invalid_type", "temperature: expected a number from 0 to 2, got number"],
    [{ ...base, temperature: -0.01 }, "invalid_temperature", "temperature: expected a number from 0 to 2, got -0.01"],
    [{ ...base, temperature: 2.01 }, "invalid_temperature", "temperature: expected a number from 0 to 2, got 2.01"],
    [{ ...base, stream: "true" }, "invalid_type", "stream: expected a boolean, got string"],
    [{ ...base, stream_options: [] }, "invalid_type", "stream_options: expected an object, got array"],
    [{ ...base, stream_options: true }, "invalid_type", "stream_options: expected an object, got boolean"],
    [{ ...base, stream_options: { include_usage: "yes" } }, "invalid_type", "stream_options.include_usage: expected a boolean, got string"],
  ])("refuses %j with %s", (body, code, message) => {
    expect(() => validateChatCompletion(body)).toThrow(expect.objectContaining({ status: 400, type: "invalid_request_error", code, message }));
  });

  it("describes a refused value without writing it out whole: deep arrays by their type (stringifying one overflowed the stack: a 500), long strings cut", () => {
    const deep = JSON.parse(`${"[".repeat(30_000)}${"]".repeat(30_000)}`) as unknown;
    for (const field of ["seed", "top_k", "max_tokens", "n"]) {
      expect(() => validateChatCompletion({ ...base, [field]: deep })).toThrow(
        expect.objectContaining({
          status: 400,
          message: `${field}: expected an integer ${field === "seed" ? "from 0 to 4294967295" : field === "top_k" ? "from 0 to 2147483647" : field === "n" ? "from 1 to 16" : "of at least 1"}, got array`,
        }),
      );
    }
    expect(() => validateChatCompletion({ ...base, logit_bias: { "1": deep } })).toThrow(
      expect.objectContaining({ status: 400, message: "logit_bias.1: expected a number from -100 to 100, got array" }),
    );
    expect(() => validateChatCompletion({ ...base, seed: "x".repeat(100_000) })).toThrow(
      expect.objectContaining({ message: "seed: expected an integer from 0 to 4294967295, got string" }),
    );
    expect(() => validateChatCompletion({ ...base, stop: ["x".repeat(100_000)] })).toThrow(
      expect.objectContaining({ message: `stop[0]: expected a string of 1 to 256 characters, got "${"x".repeat(40)}…" (100000 characters)` }),
    );
  });

  it("names the offending field for the error body's param", () => {
    expect(() => validateChatCompletion({ ...base, temperature: 3 })).toThrow(expect.objectContaining({ field: "temperature" }));
    expect(() => validateChatCompletion({ model: MODEL, messages: [{ role: "x", content: "" }] })).toThrow(expect.objectContaining({ field: "messages[0].role" }));
    expect(() => validateChatCompletion({ model: "gpt-9", messages: base.messages })).toThrow(expect.objectContaining({ code: "model_not_found", field: "model" }));
    expect(() => validateChatCompletion({ model: MODEL, messages: [] })).toThrow(expect.objectContaining({ code: "invalid_messages", field: "messages" }));
    expect(() => validateChatCompletion({ ...base, max_tokens: 0 })).toThrow(expect.objectContaining({ code: "invalid_max_tokens", field: "max_tokens" }));
    expect(() => validateChatCompletion({ ...base, stop: [""] })).toThrow(expect.objectContaining({ field: "stop[0]" }));
    expect(() => validateChatCompletion({ ...base, messages: [{ role: "user", content: [{ type: "input_audio" }] }] })).toThrow(
      expect.objectContaining({ field: "messages[0].content[0]" }),
    );
  });
});

describe("the request's model, by the catalog's names", () => {
  // an operator's catalog: one model, "house/chat", with the alias "gpt-4o"
  const names: ModelNames = { canonical: (m) => (m === "house/chat" || m === "gpt-4o" ? "house/chat" : undefined) };

  it("passes an alias on as its model's canonical id, and keeps the name sent for the answer (chat, completions, embeddings)", () => {
    expect(validateChatCompletion({ ...base, model: "gpt-4o" }, { models: names })).toMatchObject({ model: "house/chat", requestedModel: "gpt-4o" });
    expect(validateChatCompletion({ ...base, model: "house/chat" }, { models: names })).toMatchObject({ model: "house/chat", requestedModel: "house/chat" });
    expect(validateLegacyCompletion({ model: "gpt-4o", prompt: "Once" }, names)).toMatchObject({ model: "house/chat", requestedModel: "gpt-4o" });
    expect(validateEmbeddings({ model: "gpt-4o", input: "a" }, names)).toMatchObject({ model: "house/chat", requestedModel: "gpt-4o" });
  });

  it("refuses a name the catalog does not have, a built-in id included, with 400 model_not_found naming model, before any other field", () => {
    const notFound = (name: string) =>
      expect.objectContaining({ status: 400, code: "model_not_found", field: "model", message: `model: "${name}" is not a model of this service (see GET /v1/models)` });
    expect(() => validateChatCompletion(base, { models: names })).toThrow(notFound(MODEL));
    expect(() => validateChatCompletion({ model: "nope", messages: [] }, { models: names })).toThrow(notFound("nope"));
    expect(() => validateLegacyCompletion({ model: MODEL, prompt: "x" }, names)).toThrow(notFound(MODEL));
    expect(() => validateEmbeddings({ model: MODEL, input: "x" }, names)).toThrow(notFound(MODEL));
    // a model that is not a string is the schema's to refuse, as before
    expect(() => validateChatCompletion({ model: 5, messages: base.messages }, { models: names })).toThrow(expect.objectContaining({ code: "invalid_type", field: "model" }));
    expect(() => validateChatCompletion({ messages: base.messages }, { models: names })).toThrow(expect.objectContaining({ code: "missing_required_field", field: "model" }));
  });
});

describe("validateChatCompletion: tools", () => {
  const weather = {
    type: "function",
    function: { name: "get_weather", description: "The weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
  };
  const call = { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } };
  const history = [
    { role: "user", content: "weather?" },
    { role: "assistant", content: null, tool_calls: [call] },
    { role: "tool", tool_call_id: "call_1", content: "sunny" },
  ];

  it("takes tools, the choice and parallel_tool_calls; tool_choice none sends no tools", () => {
    expect(validateChatCompletion({ ...base, tools: [weather] })).toMatchObject({
      tools: [{ name: "get_weather", description: "The weather in a city", parameters: weather.function.parameters }],
    });
    expect(validateChatCompletion({ ...base, tools: [weather] })).not.toHaveProperty("toolChoice");
    expect(validateChatCompletion({ ...base, tools: [weather], tool_choice: "required", parallel_tool_calls: false })).toMatchObject({
      toolChoice: "required",
      parallelToolCalls: false,
    });
    expect(validateChatCompletion({ ...base, tools: [weather], tool_choice: { type: "function", function: { name: "get_weather" } } }).toolChoice).toEqual({ name: "get_weather" });
    const none = validateChatCompletion({ ...base, tools: [weather], tool_choice: "none", n: 2, logprobs: true, stream: true });
    expect(none).not.toHaveProperty("tools");
    expect(none).toMatchObject({ n: 2, logprobs: 0 });
    expect(validateChatCompletion({ ...base, tools: [{ type: "function", function: { name: "ping" } }] }).tools).toEqual([{ name: "ping" }]);
  });

  it("carries an assistant's calls and the tool messages answering them (a tool message's name is not put in its text)", () => {
    const messages = validateChatCompletion({ ...base, messages: [...history.slice(0, 2), { ...history[2], name: "weather_bot" }] }).messages;
    expect(messages).toEqual([
      { role: "user", content: "weather?" },
      { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }] },
      { role: "tool", content: "sunny", toolCallId: "call_1" },
    ]);
  });

  it("takes hostile tool names as plain names: __proto__, constructor", () => {
    const tools = ["__proto__", "constructor", "toString"].map((name) => ({ type: "function", function: { name } }));
    expect(validateChatCompletion({ ...base, tools, tool_choice: { type: "function", function: { name: "constructor" } } })).toMatchObject({
      tools: [{ name: "__proto__" }, { name: "constructor" }, { name: "toString" }],
      toolChoice: { name: "constructor" },
    });
    expect(() => validateChatCompletion({ ...base, tools, tool_choice: { type: "function", function: { name: "hasOwnProperty" } } })).toThrow(
      expect.objectContaining({ code: "invalid_tool_choice" }),
    );
  });

  const deep = "[".repeat(65) + "]".repeat(65);
  let nested: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < 7; i++) nested = { type: "array", items: nested, minItems: 9, maxItems: 9 };
  it.each([
    [{ ...base, tools: [weather, weather] }, "invalid_tools", 'tools[1].function.name: "get_weather" is the name of an earlier tool'],
    [
      { ...base, tools: [{ type: "function", function: { name: "a b" } }] },
      "invalid_name",
      'tools[0].function.name: expected a name of 1 to 64 letters, digits, _ or -, got "a b"',
    ],
    [{ ...base, tools: [{ type: "web_search" }] }, "unsupported_parameter", 'tools[0].type: tools of type "web_search" are not supported; only "function"'],
    [
      { ...base, tools: [{ type: "function", function: { name: "f", parameters: { type: "string" } } }] },
      "invalid_tools",
      'tools[0].function.parameters.type: must be "object": the arguments are a JSON object',
    ],
    [
      { ...base, tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: { type: "string", pattern: "a" } } } } }] },
      "invalid_tools",
      "tools[0].function.parameters.properties.x.pattern: this keyword is not supported by structured output (the grammar could not hold the output to it)",
    ],
    [
      { ...base, tools: Array.from({ length: 129 }, (_, i) => ({ type: "function", function: { name: `f${i}` } })) },
      "invalid_tools",
      "tools: expected at most 128 tools, got 129 items",
    ],
    [
      { ...base, tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: nested } } } }] },
      "invalid_tools",
      expect.stringMatching(
        /^tools\[0\]\.function\.parameters: documented for the model, these parameters would take about \d{8,} bytes of prompt \(an array with minItems writes its item's type out up to 10 times, nested arrays multiply\); at most 65536$/,
      ),
    ],
    [
      { ...base, tools: [weather], tool_choice: { type: "function", function: { name: "other" } } },
      "invalid_tool_choice",
      'tool_choice.function.name: "other" is not one of the tools',
    ],
    [
      { ...base, tools: [weather], tool_choice: "always" },
      "invalid_tool_choice",
      'tool_choice: expected one of "none", "auto", "required", or {"type": "function", "function": {"name": …}}, got "always"',
    ],
    [{ ...base, tools: [weather], n: 2 }, "unsupported_parameter", "n: with tools, one choice only"],
    [{ ...base, tools: [weather], logprobs: true }, "unsupported_parameter", "logprobs: not supported together with tools"],
    [
      { ...base, tools: [weather], response_format: { type: "json_object" } },
      "unsupported_parameter",
      "response_format: not supported together with tools (a call's arguments are held to its parameters)",
    ],
    [{ ...base, tools: [weather], parallel_tool_calls: "yes" }, "invalid_type", "parallel_tool_calls: expected a boolean, got string"],
    [
      { ...base, messages: [{ role: "tool", tool_call_id: "call_9", content: "x" }] },
      "invalid_messages",
      'messages[0].tool_call_id: "call_9" is not a call of the assistant message before it',
    ],
    [
      { ...base, messages: history.slice(0, 2) },
      "invalid_messages",
      'messages[1].tool_calls: the call "call_1" has no tool message answering it (each call is answered by a tool message right after it)',
    ],
    [
      { ...base, messages: [...history, { role: "user", content: "and?" }, { role: "tool", tool_call_id: "call_1", content: "again" }] },
      "invalid_messages",
      'messages[4].tool_call_id: "call_1" is not a call of the assistant message before it',
    ],
    [{ ...base, messages: [...history, history[2]] }, "invalid_messages", 'messages[3].tool_call_id: the call "call_1" is answered twice'],
    [
      { ...base, messages: [history[0], { role: "assistant", content: null, tool_calls: [call, call] }] },
      "invalid_messages",
      'messages[1].tool_calls: the id "call_1" is used by two calls',
    ],
    [{ ...base, messages: [{ role: "user", content: "x", tool_calls: [call] }] }, "invalid_messages", "messages[0].tool_calls: only assistant messages have tool calls"],
    [
      { ...base, messages: [history[0], { role: "assistant", content: null, tool_calls: [{ ...call, function: { name: "f", arguments: "{oops" } }] }] },
      "invalid_messages",
      "messages[1].tool_calls[0].function.arguments: is not JSON",
    ],
    [
      { ...base, messages: [history[0], { role: "assistant", content: null, tool_calls: [{ ...call, function: { name: "f", arguments: deep } }] }] },
      "invalid_messages",
      "messages[1].tool_calls[0].function.arguments: nests deeper than 64 levels",
    ],
    [{ ...base, functions: [{ name: "f" }] }, "unsupported_parameter", "functions: function calling is not supported yet"],
  ])("refuses %j with %s", (body, code, message) => {
    expect(() => validateChatCompletion(body)).toThrow(expect.objectContaining({ status: 400, type: "invalid_request_error", code, message }));
  });
});

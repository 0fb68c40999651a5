/** Chat completion bodies: what is accepted as given, and every refusal's code and message (field first). */
import { describe, expect, it } from "vitest";
import { validateChatCompletion } from "./validate.js";

const MODEL = "famB-v3.1";
const base = { model: MODEL, messages: [{ role: "user", content: "hi" }] };

describe("validateChatCompletion", () => {
  it("accepts the minimum and fills the defaults", () => {
    expect(validateChatCompletion(base)).toEqual({ model: MODEL, messages: [{ role: "user", content: "hi" }], stream: false, includeUsage: false });
  });

  it("keeps every role's messages in order, with only role and content", () => {
    const messages = [{ role: "system", content: "s" }, { role: "user", content: "u", name: "x" }, { role: "assistant", content: "" }];
    expect(validateChatCompletion({ ...base, messages }).messages).toEqual([{ role: "system", content: "s" }, { role: "user", content: "u" }, { role: "assistant", content: "" }]);
  });

  it("takes max_tokens, temperature (0 and 2 included), stream and include_usage as given", () => {
    expect(validateChatCompletion({ ...base, max_tokens: 1, temperature: 0, stream: true, stream_options: { include_usage: true } }))
      .toEqual({ ...base, maxTokens: 1, temperature: 0, stream: true, includeUsage: true });
    expect(validateChatCompletion({ ...base, temperature: 2, stream: false, stream_options: { include_usage: false } })).toMatchObject({ temperature: 2, stream: false, includeUsage: false });
    expect(validateChatCompletion({ ...base, max_tokens: null, temperature: null, stream: null, stream_options: null })).toEqual({ ...base, stream: false, includeUsage: false });
    expect(validateChatCompletion({ ...base, stream_options: {} }).includeUsage).toBe(false);
    expect(validateChatCompletion({ ...base, stream_options: { include_usage: null } }).includeUsage).toBe(false);
  });

  it("ignores unknown members", () => {
    expect(validateChatCompletion({ ...base, future_field: 1 })).toEqual(validateChatCompletion(base));
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
    [{ model: MODEL, messages: [] }, "invalid_messages", "messages: must hold at least one message"],
    [{ model: MODEL, messages: ["hi"] }, "invalid_type", "messages[0]: expected an object with role and content, got string"],
    [{ model: MODEL, messages: [null] }, "invalid_type", "messages[0]: expected an object with role and content, got null"],
    [{ model: MODEL, messages: [[]] }, "invalid_type", "messages[0]: expected an object with role and content, got array"],
    [{ model: MODEL, messages: [{ role: "user", content: "a" }, { content: "b" }] }, "missing_required_field", "messages[1].role: is required"],
    [{ model: MODEL, messages: [{ role: null, content: "b" }] }, "missing_required_field", "messages[0].role: is required"],
    [{ model: MODEL, messages: [{ role: 1, content: "b" }] }, "invalid_type", "messages[0].role: expected a string, got number"],
    [{ model: MODEL, messages: [{ role: "robot", content: "b" }] }, "invalid_role", 'messages[0].role: "robot" is not one of system, user, assistant'],
    [{ model: MODEL, messages: [{ role: "user" }] }, "missing_required_field", "messages[0].content: is required"],
    [{ model: MODEL, messages: [{ role: "user", content: null }] }, "missing_required_field", "messages[0].content: is required"],
    [{ model: MODEL, messages: [{ role: "user", content: 3 }] }, "invalid_type", "messages[0].content: expected a string, got number"],
    [{ ...base, max_tokens: 0 }, "invalid_max_tokens", "max_tokens: expected an integer of at least 1, got 0"],
    [{ ...base, max_tokens: 1.5 }, "invalid_max_tokens", "max_tokens: expected an integer of at least 1, got 1.5"],
    [{ ...base, max_tokens: "5" }, "invalid_max_tokens", 'max_tokens: expected an integer of at least 1, got "5"'],
    [{ ...base, temperature: "1" }, "invalid_type", "temperature: expected a number from 0 to 2, got string"],
    [{ ...base, temperature: Infinity }, "invalid_type", "temperature: expected a number from 0 to 2, got number"],
    [{ ...base, temperature: -0.01 }, "invalid_temperature", "temperature: -0.01 is outside 0 to 2"],
    [{ ...base, temperature: 2.01 }, "invalid_temperature", "temperature: 2.01 is outside 0 to 2"],
    [{ ...base, stream: "true" }, "invalid_type", "stream: expected a boolean, got string"],
    [{ ...base, stream_options: [] }, "invalid_type", "stream_options: expected an object, got array"],
    [{ ...base, stream_options: true }, "invalid_type", "stream_options: expected an object, got boolean"],
    [{ ...base, stream_options: { include_usage: "yes" } }, "invalid_type", "stream_options.include_usage: expected a boolean, got string"],
  ])("refuses %j with %s", (body, code, message) => {
    expect(() => validateChatCompletion(body)).toThrow(expect.objectContaining({ status: 400, type: "invalid_request_error", code, message }));
  });

  it("names the offending field for the error body's param", () => {
    expect(() => validateChatCompletion({ ...base, temperature: 3 })).toThrow(expect.objectContaining({ field: "temperature" }));
    expect(() => validateChatCompletion({ model: MODEL, messages: [{ role: "x", content: "" }] })).toThrow(expect.objectContaining({ field: "messages[0].role" }));
    expect(() => validateChatCompletion({ model: "gpt-9", messages: base.messages })).toThrow(expect.objectContaining({ code: "model_not_found", field: "model" }));
    expect(() => validateChatCompletion({ model: MODEL, messages: [] })).toThrow(expect.objectContaining({ code: "invalid_messages", field: "messages" }));
    expect(() => validateChatCompletion({ ...base, max_tokens: 0 })).toThrow(expect.objectContaining({ code: "invalid_max_tokens", field: "max_tokens" }));
  });
});

/**
 * Bodies a tenant can send within the 4 MB limit, shaped to make a translation's work grow with the
 * square of their size: each must translate in linear time (the test's own timeout is the bound: the
 * quadratic versions took 11–20 s on the 2-core machine, and the linear ones a fraction of a second,
 * while the event loop, every tenant's, waited).
 */
import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "../../core/errors.js";
import { BLOCK_SEPARATOR, validateMessages } from "./anthropic.js";
import { validateResponses } from "./responses-schema.js";

const BOUND_MS = 8000;

describe("translations in linear time", () => {
  it(
    "Anthropic: 130,000 consecutive user turns are combined into one message",
    () => {
      const n = 130_000;
      const body = { model: "famB-v3.1", max_tokens: 8, messages: Array.from({ length: n }, () => ({ role: "user", content: "x" })) };
      expect(JSON.stringify(body).length).toBeLessThan(4 * 1024 ** 2);
      const { request } = validateMessages(body);
      expect(request.messages).toHaveLength(1);
      expect(request.messages[0]!.content).toBe(Array.from({ length: n }, () => "x").join(BLOCK_SEPARATOR));
    },
    BOUND_MS,
  );

  it(
    "Anthropic: 75,000 tool_use blocks of one assistant turn are checked for repeated ids",
    () => {
      const n = 75_000;
      const uses = Array.from({ length: n }, (_, i) => ({ type: "tool_use", id: `t${i}`, name: "f", input: {} }));
      // the calls are never answered: refused, once every id was checked
      const body = {
        model: "famB-v3.1",
        max_tokens: 8,
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: uses },
        ],
      };
      expect(JSON.stringify(body).length).toBeLessThan(4 * 1024 ** 2);
      expect(() => validateMessages(body)).toThrow(InvalidRequestError);
    },
    BOUND_MS,
  );

  it(
    "Responses: 58,000 consecutive function_call items join one assistant message",
    () => {
      const n = 58_000;
      const input = [
        { type: "message", role: "user", content: "go" },
        ...Array.from({ length: n }, (_, i) => ({ type: "function_call", call_id: `c${i}`, name: "f", arguments: "{}" })),
        ...Array.from({ length: n }, (_, i) => ({ type: "function_call_output", call_id: `c${i}`, output: "ok" })),
      ];
      const body = validateResponses({ model: "famB-v3.1", input, tools: [{ type: "function", name: "f", parameters: { type: "object" } }] });
      expect(body.messages[1]!.toolCalls).toHaveLength(n);
    },
    BOUND_MS,
  );
});

/** What a chat completion holds of its account's token quota while it runs: its prompt, all of it, and its max_tokens. */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../../core/log.js";
import { validateChatCompletion } from "../../chat/validate.js";
import type { CompletionEvent } from "../../fleet/index.js";
import type { AppEnv } from "../env.js";
import { eventStream, tokenEstimate } from "./generate.js";

const big = "x".repeat(4000); // 1000 tokens at four characters a token

describe("tokenEstimate", () => {
  const base = { model: "famB-v3.1", max_tokens: 10 };
  const estimate = (body: Record<string, unknown>) => tokenEstimate(validateChatCompletion({ ...base, ...body }));

  it("counts string content and the text of content parts alike", () => {
    expect(estimate({ messages: [{ role: "user", content: big }] })).toBe(1010);
    expect(estimate({ messages: [{ role: "user", content: [{ type: "text", text: big }] }] })).toBe(1010);
    // parts as they reach the estimate without the validator's joining (a body type that keeps them)
    expect(tokenEstimate({ messages: [{ role: "user", content: [{ type: "text", text: big }] as never }], maxTokens: 10 })).toBe(1010);
  });

  it("counts the tools' definitions, the assistant's function calls and the tool results", () => {
    const plain = estimate({ messages: [{ role: "user", content: "hi" }] });
    const tools = [{ type: "function", function: { name: "lookup", description: big, parameters: { type: "object", properties: { q: { type: "string", description: big } } } } }];
    expect(estimate({ messages: [{ role: "user", content: "hi" }], tools })).toBeGreaterThanOrEqual(plain + 2000);
    const calls = [
      { role: "user", content: "hi" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: JSON.stringify({ q: big }) } }] },
    ];
    expect(estimate({ messages: [...calls, { role: "tool", tool_call_id: "call_1", content: "ok" }] })).toBeGreaterThanOrEqual(plain + 1000);
    expect(estimate({ messages: [...calls, { role: "tool", tool_call_id: "call_1", content: big }] })).toBeGreaterThanOrEqual(plain + 2000);
  });

  it("adds max_tokens once per choice", () => {
    expect(estimate({ messages: [{ role: "user", content: big }], n: 3 })).toBe(1030);
  });
});

describe("eventStream", () => {
  /** The body of a stream over `events`, each event written as its type and a failure as `failed: CODE`. */
  async function streamed(events: CompletionEvent[]): Promise<string> {
    const iterator = (async function* () {
      yield* events;
    })();
    const first = await iterator.next();
    const app = new Hono<AppEnv>().get("/", (c) =>
      eventStream(c, {
        events: iterator,
        first,
        opening: "open;",
        eventText: (e) => `${e.type};`,
        failure: (err) => `failed: ${(err as { code: string }).code};`,
        logger: createLogger("test", "silent"),
        release: () => undefined,
      }),
    );
    return (await app.request("/")).text();
  }
  const text: CompletionEvent = { type: "text", index: 0, text: "hi" };
  const done: CompletionEvent = { type: "done", finishReason: "stop", promptTokens: 1, completionTokens: 1, finishReasons: ["stop"], cachedTokens: 0, fingerprint: "" };

  it("ends with the failure when the events end without done, and as they say when they end with it", async () => {
    expect(await streamed([text, done])).toBe("open;text;done;");
    expect(await streamed([text])).toBe("open;text;failed: agent_error;");
  });
});

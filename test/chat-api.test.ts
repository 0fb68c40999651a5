/**
 * POST /v1/chat/completions and GET /v1/models against a real scheduler and a real agent
 * (node-llama-cpp running the fabricated tiny model), over loopback HTTP and gRPC.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, postChat, TINY_MODEL, until, waitForAgents } from "./helpers/fleet.js";
import { GreedyReference, type ReferenceAnswer, type ReferenceMessage } from "./helpers/reference.js";

let scheduler: SchedulerHandle;
let agent: AgentHandle;
let base: string;
let key: string;
/** The same GGUF, generated greedily outside Kiln: what each greedy answer's text must be. */
let reference: GreedyReference;

beforeAll(async () => {
  scheduler = await inProcessScheduler({ maxBody: "2kb" });
  agent = await inProcessAgent(scheduler);
  await waitForAgents(scheduler, 1);
  base = httpBase(scheduler);
  key = (await scheduler.keys.create({ account: "acme", tier: "pro" })).token;
  reference = await GreedyReference.load(TINY_MODEL);
});

afterAll(async () => {
  await agent?.close();
  await scheduler?.close();
  await reference?.dispose();
});

const user = (content = "Hello"): ReferenceMessage[] => [{ role: "user", content }];
const ok = (body: Record<string, unknown>) => postChat(base, key, { model: MODEL_ID, messages: user(), max_tokens: 4, ...body });

/** The reference answer, which must have text (else a test comparing with it proves nothing). */
async function expected(messages: ReferenceMessage[], maxTokens: number): Promise<ReferenceAnswer> {
  const answer = await reference.complete(messages, maxTokens);
  expect(answer.text, "the reference's own text").not.toBe("");
  return answer;
}

/** A streamed greedy completion: its chunks, the concatenated delta.content, the finish reason. */
async function streamChat(messages: ReferenceMessage[], maxTokens: number, extra: Record<string, unknown> = {}) {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL_ID, messages, max_tokens: maxTokens, temperature: 0, stream: true, ...extra }),
  });
  const events = (await res.text())
    .split("\n\n")
    .filter(Boolean)
    .map((e) => e.replace(/^data: /, ""));
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
  const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
  const finish: unknown = chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason;
  return { res, events, chunks, text, finish };
}

describe("request rules (SPEC request table, DESIGN error table)", () => {
  const cases: [string, unknown, number, string, RegExp][] = [
    ["missing model", { messages: user() }, 400, "missing_required_field", /^model:/],
    ["missing messages", { model: MODEL_ID }, 400, "missing_required_field", /^messages:/],
    ["missing role", { model: MODEL_ID, messages: [{ content: "x" }] }, 400, "missing_required_field", /^messages\[0\]\.role:/],
    ["missing content", { model: MODEL_ID, messages: [{ role: "user" }] }, 400, "missing_required_field", /^messages\[0\]\.content:/],
    [
      "bad role",
      {
        model: MODEL_ID,
        messages: [
          { role: "user", content: "a" },
          { role: "bot", content: "x" },
        ],
      },
      400,
      "invalid_role",
      /^messages\[1\]\.role:.*bot/,
    ],
    ["empty messages", { model: MODEL_ID, messages: [] }, 400, "invalid_messages", /^messages:/],
    ["temperature -0.01", { model: MODEL_ID, messages: user(), temperature: -0.01 }, 400, "invalid_temperature", /^temperature:/],
    ["temperature 2.01", { model: MODEL_ID, messages: user(), temperature: 2.01 }, 400, "invalid_temperature", /^temperature:/],
    ["temperature as a string", { model: MODEL_ID, messages: user(), temperature: "1" }, 400, "invalid_type", /^temperature:/],
    ["unknown model", { model: "gpt-4", messages: user() }, 400, "model_not_found", /^model:.*gpt-4/],
    ["model of the wrong type", { model: 7, messages: user() }, 400, "invalid_type", /^model:/],
    ["content of the wrong type", { model: MODEL_ID, messages: [{ role: "user", content: 5 }] }, 400, "invalid_type", /^messages\[0\]\.content:/],
    ["max_tokens 0", { model: MODEL_ID, messages: user(), max_tokens: 0 }, 400, "invalid_max_tokens", /^max_tokens:/],
    ["max_tokens 1.5", { model: MODEL_ID, messages: user(), max_tokens: 1.5 }, 400, "invalid_max_tokens", /^max_tokens:/],
    ["max_tokens as a string", { model: MODEL_ID, messages: user(), max_tokens: "10" }, 400, "invalid_type", /^max_tokens:/],
    ["stream not a boolean", { model: MODEL_ID, messages: user(), stream: "yes" }, 400, "invalid_type", /^stream:/],
    ["a body that is not an object", [1, 2], 400, "invalid_type", /^body:/],
  ];
  it.each(cases)("%s → %i %s", async (_name, body, status, code, message) => {
    const res = await postChat(base, key, body);
    expect(res.status).toBe(status);
    expect(res.body.error).toEqual({ type: "invalid_request_error", code, message: expect.stringMatching(message), param: expect.any(String) });
    expect(res.body.error.param).toBe(res.body.error.message.slice(0, res.body.error.message.indexOf(":"))); // the field the message names
  });

  it("malformed JSON → 400 invalid_json", async () => {
    const res = await postChat(base, key, '{"model": "famB-v3.1", "messages": [');
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_json", message: expect.stringMatching(/^body:/) });
  });

  it("a body over the limit → 413, refused while streaming (no Content-Length)", async () => {
    const big = JSON.stringify({ model: MODEL_ID, messages: user("x".repeat(4096)) });
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode(big));
        c.close();
      },
    });
    const res = await postChat(base, key, big);
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "request_too_large", message: expect.stringMatching(/^body:/) });
    const chunked = await postChat(base, key, undefined, { body: stream, duplex: "half" } as RequestInit);
    expect(chunked.status).toBe(413);
  });

  it("temperature 0 and 2 pass; unknown members are ignored", async () => {
    for (const temperature of [0, 2]) {
      const res = await ok({ temperature, frobnicate: { deep: true }, n: 1 });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
  });

  it("a catalog model no agent serves → 503 service_unavailable_error", async () => {
    const res = await postChat(base, key, { model: "famA4:405b", messages: user() });
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ type: "service_unavailable_error", code: "model_unavailable", message: expect.stringMatching(/^model:.*famA4:405b/) });
  });

  it("an unknown route → 404 with the Error body", async () => {
    const res = await fetch(`${base}/v1/nothing`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: "not_found_error" });
  });

  it("a prompt longer than the context → 400 context_length_exceeded naming messages", async () => {
    const roomy = await inProcessScheduler({});
    const a2 = await inProcessAgent(roomy, { contextSize: "256" });
    try {
      await waitForAgents(roomy, 1);
      const k = (await roomy.keys.create({ account: "x", tier: "pro" })).token;
      const long = await postChat(httpBase(roomy), k, { model: MODEL_ID, messages: user("y".repeat(600)) });
      expect(long.status).toBe(400);
      expect(long.body.error).toMatchObject({ type: "invalid_request_error", code: "context_length_exceeded", message: expect.stringMatching(/^messages:/) });
    } finally {
      await a2.close();
      await roomy.close();
    }
  });
});

describe("completions", () => {
  it("answers with the spec's fields", async () => {
    const want = await expected(user(), 5);
    const res = await ok({ max_tokens: 5, temperature: 0 });
    expect(res.status).toBe(200);
    const b = res.body;
    expect(b).toMatchObject({ object: "chat.completion", model: MODEL_ID, id: expect.stringMatching(/^chatcmpl-/) });
    expect(Number.isInteger(b.created)).toBe(true);
    expect(b.choices).toHaveLength(1);
    expect(b.choices[0]).toMatchObject({ index: 0, message: { role: "assistant", content: want.text }, finish_reason: "length" });
    expect(want.finishReason).toBe("length");
    expect(b.usage.completion_tokens).toBe(want.completionTokens);
    expect(b.usage.total_tokens).toBe(b.usage.prompt_tokens + b.usage.completion_tokens);
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });

  it("usage.prompt_tokens is the rendered prompt's token count by the model's own tokenizer", async () => {
    const messages: ReferenceMessage[] = [
      { role: "system", content: "You are a terse assistant." },
      { role: "user", content: "What is two plus two?" },
      { role: "assistant", content: "Four." },
      { role: "user", content: "And times three? Ünïcödé ☃" },
    ];
    // ChatML rendered by hand (the GGUF's template), tokenized with special tokens, after BOS (which node-llama-cpp's ChatML wrapper adds).
    const promptTokens = reference.promptTokens(messages).length;
    const want = await expected(messages, 3);
    const res = await postChat(base, key, { model: MODEL_ID, messages: [...messages], max_tokens: 3, temperature: 0 });
    expect(res.status).toBe(200);
    expect(res.body.usage.prompt_tokens).toBe(promptTokens);
    expect(res.body.choices[0].message.content).toBe(want.text);
    // The same request again: the KV cache is reused, neither the count nor the text changes.
    const again = await postChat(base, key, { model: MODEL_ID, messages, max_tokens: 3, temperature: 0 });
    expect(again.body.usage.prompt_tokens).toBe(promptTokens);
    expect(again.body.choices[0].message.content).toBe(want.text);
  });

  // Greedy, so the outcome is deterministic: sampling can draw the end-of-turn token early.
  it.each([1, 7, 32])("max_tokens %i → finish_reason length with exactly that many completion tokens", async (n) => {
    const want = await expected(user(), n);
    const res = await ok({ max_tokens: n, temperature: 0 });
    expect(res.body.choices[0].finish_reason).toBe("length");
    expect(res.body.usage.completion_tokens).toBe(n);
    expect(res.body.choices[0].message.content).toBe(want.text);
  });

  // "ping": the tiny model's greedy answer ends with the end-of-turn token after 20 tokens.
  it("a greedy answer that ends on its own → finish_reason stop, the reference's text, the end-of-turn token counted", async () => {
    const want = await expected(user("ping"), 64);
    expect(want.finishReason).toBe("stop");
    const res = await ok({ messages: user("ping"), max_tokens: 64, temperature: 0 });
    expect(res.body.choices[0]).toMatchObject({ message: { content: want.text }, finish_reason: "stop" });
    expect(res.body.usage.completion_tokens).toBe(want.completionTokens);
    const streamed = await streamChat(user("ping"), 64);
    expect(streamed.text).toBe(want.text);
    expect(streamed.finish).toBe("stop");
  });

  it("streams OpenAI server-sent events ending with [DONE], with usage on request", async () => {
    const want = await expected(user(), 12);
    const { res, events, chunks, text, finish } = await streamChat(user(), 12, { stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(events.at(-1)).toBe("[DONE]");
    for (const c of chunks) expect(c).toMatchObject({ object: "chat.completion.chunk", model: MODEL_ID, id: chunks[0].id });
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    expect(text).toBe(want.text);
    expect(finish).toBe("length");
    expect(chunks.at(-1).usage).toMatchObject({ completion_tokens: 12 });
  });

  it("8 concurrent requests on 4 sequences all complete, never more than 4 generating at once", async () => {
    const pool = agent.engine.modelPools[0]!;
    const prompts = Array.from({ length: 8 }, (_, i) => user(`request ${i}`));
    const wants: string[] = [];
    for (const p of prompts) wants.push((await expected(p, 48)).text);
    expect(new Set(wants).size, "the prompts' reference texts differ").toBe(8);
    const answer = (maxTokens: number) => Promise.all(prompts.map((messages) => ok({ max_tokens: maxTokens, temperature: 0, messages })));
    pool.peakBusy = 0;
    const results = await answer(48);
    for (const r of results) expect(r.status).toBe(200);
    // Each answer is its own prompt's text: none swapped, mixed or garbled by the batching.
    expect(results.map((r) => r.body.choices[0].message.content)).toEqual(wants);
    expect(pool.peakBusy).toBeLessThanOrEqual(4);
    // Batched: 4 at once, and no more. Long answers (300 tokens; their texts depend on which
    // sequences share a batch when): 48 tokens take ~13 ms alone in the native loop, which a loaded
    // machine may spend before the fourth request arrives.
    pool.peakBusy = 0;
    for (const r of await answer(300)) expect(r.status).toBe(200);
    expect(pool.peakBusy).toBe(4);
    const snap = scheduler.fleet.snapshot()[0]!;
    expect(snap.pools[0]!.peakInflight).toBeLessThanOrEqual(4);
    expect(snap.pools[0]!.inflight).toBe(0);
  });

  it("4 concurrent streamed requests each stream their own prompt's text", async () => {
    const prompts = ["Hello", "Tell me a story", "Once upon a time", "What is two plus two?"].map((p) => user(p));
    const wants: string[] = [];
    for (const p of prompts) wants.push((await expected(p, 24)).text);
    expect(new Set(wants).size, "the prompts' reference texts differ").toBe(4);
    const streams = await Promise.all(prompts.map((p) => streamChat(p, 24)));
    expect(streams.map((s) => s.text)).toEqual(wants);
  });

  it("aborting a streamed request cancels it on the agent (a cancelled answer, not a finished one) and frees its sequence", async () => {
    const pool = agent.engine.modelPools[0]!;
    const answers: { body: string; code?: string; finish?: string }[] = [];
    const receive = scheduler.fleet.receive.bind(scheduler.fleet);
    scheduler.fleet.receive = (nodeId, link, message) => {
      if (message.body === "error" || message.body === "done")
        answers.push({ body: message.body, ...(message.error ? { code: message.error.code } : {}), ...(message.done ? { finish: message.done.finish_reason } : {}) });
      receive(nodeId, link, message);
    };
    try {
      const ac = new AbortController();
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        signal: ac.signal,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL_ID, messages: user(), max_tokens: 1800, temperature: 0, stream: true }),
      });
      const reader = res.body!.getReader();
      await reader.read();
      await until(() => pool.busy === 1, 5000, "generation to start");
      ac.abort();
      await until(() => answers.length === 1, 10_000, "the agent's answer");
      expect(answers).toEqual([{ body: "error", code: "cancelled" }]); // stopped by the cancel, not run to max_tokens
      await until(() => pool.busy === 0 && scheduler.fleet.snapshot()[0]!.pools[0]!.inflight === 0, 5000, "the sequence and the slot to be freed");
    } finally {
      scheduler.fleet.receive = receive;
    }
  });
});

describe("GET /v1/models", () => {
  it("carries both shapes; the served model is available with the agent's hardware", async () => {
    const res = await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any; // shape checked field by field below
    expect(body.object).toBe("list");
    expect(body.data).toHaveLength(8);
    for (const m of body.data) expect(m).toMatchObject({ id: expect.any(String), object: "model", created: expect.any(Number), owned_by: expect.any(String) });
    const served = body.models.find((m: { id: string }) => m.id === MODEL_ID);
    expect(served).toMatchObject({ name: expect.any(String), status: "available", gpu_type: "none (CPU)" });
    expect(Number.isInteger(served.memory_gb) && served.memory_gb > 0).toBe(true);
    expect(body.models.find((m: { id: string }) => m.id === "famA4:70b")).toMatchObject({ status: "unavailable" });
  });
});

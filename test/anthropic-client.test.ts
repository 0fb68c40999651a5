/**
 * Anthropic's Messages API through Anthropic's own SDK (`@anthropic-ai/sdk`) against a real scheduler
 * and agents on loopback (the fabricated tiny model: its words are noise, its tool calls are generated
 * under grammars, greedy at temperature 0): a Claude-style turn with a tool call, its tool_result and
 * the answer, streamed and not, each the same as the same conversation through /v1/chat/completions;
 * stop sequences; count_tokens; a field Kiln cannot honour refused by name; keys in x-api-key and
 * Authorization; and a stream whose agent is killed mid-way ending with Anthropic's error event.
 * Every answer the SDK got (each message, each stream event, each error) is checked against the
 * schema derived from the SDK's own types (test/fixtures/anthropic).
 */
import Anthropic from "@anthropic-ai/sdk";
import { Ajv } from "ajv";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { eventViolations, parseSse, violations } from "./fixtures/anthropic/conformance.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, spawnAgent, until, waitForAgents, type KilnProcess } from "./helpers/fleet.js";

/** Every answer the clients got, by route: its status and body (the SSE text of a stream), checked after each test. */
const answers: { path: string; status: number; type: string; body: Promise<string> }[] = [];

/** `fetch` as the SDK uses it, keeping a copy of each answer. */
const recording: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  answers.push({ path: new URL(res.url).pathname, status: res.status, type: res.headers.get("content-type") ?? "", body: res.clone().text() });
  return res;
};

/** How each answer the clients got breaks Anthropic's schema (none: all conform). */
async function answerViolations(): Promise<string[]> {
  const problems: string[] = [];
  for (const a of answers.splice(0)) {
    const text = await a.body;
    const where = `${a.status} ${a.path}`;
    if (a.type.startsWith("text/event-stream")) {
      const events = parseSse(text);
      if (events[0]?.event !== "message_start") problems.push(`${where}: the stream opens with ${events[0]?.event}`);
      for (const e of events) problems.push(...eventViolations(e.event, e.data).map((v) => `${where} ${e.event}: ${v}`));
    } else {
      const kind = a.status !== 200 ? "ErrorResponse" : a.path.endsWith("/count_tokens") ? "MessageTokensCount" : "Message";
      problems.push(...violations(kind, JSON.parse(text)).map((v) => `${where} ${kind}: ${v}`));
    }
  }
  return problems;
}

afterEach(async () => {
  expect(await answerViolations()).toEqual([]);
});

const weather: Anthropic.Tool = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: {
    type: "object",
    properties: { city: { type: "string", enum: ["Paris", "Rome"] }, days: { type: "integer" } },
    required: ["city", "days"],
    additionalProperties: false,
  },
};
const validInput = new Ajv().compile(weather.input_schema);
const SYSTEM = "You answer about the weather.";
const QUESTION = "What is the weather in Paris?";

/** Sampling the SDK's types no longer list but the API takes: greedy, so two routes can be compared. */
const greedy = { temperature: 0 } as Record<string, unknown>;

describe("Anthropic's SDK → a scheduler and an agent", () => {
  let scheduler: SchedulerHandle;
  let agent: AgentHandle;
  let base: string;
  let key: string;
  let client: Anthropic;

  beforeAll(async () => {
    scheduler = await inProcessScheduler();
    agent = await inProcessAgent(scheduler);
    await waitForAgents(scheduler, 1);
    base = httpBase(scheduler);
    key = (await scheduler.keys.create({ account: "claude", tier: "pro" })).token;
    client = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0, fetch: recording });
  }, 60_000);
  afterAll(async () => {
    await agent?.close();
    await scheduler?.close();
  });

  /** The same conversation through /v1/chat/completions: its reply (text, calls, finish reason) and usage. */
  async function viaChat(body: Record<string, unknown>) {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL_ID, temperature: 0, ...body }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as {
      choices: { message: { content: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[] }; finish_reason: string }[];
      usage: { prompt_tokens: number; completion_tokens: number };
    };
  }

  /** The second turn's messages: the question, the assistant's turn as answered, each call's result. */
  const secondTurn = (first: Anthropic.Message, result: string): Anthropic.MessageParam[] => [
    { role: "user", content: QUESTION },
    { role: "assistant", content: first.content as Anthropic.ContentBlockParam[] },
    {
      role: "user",
      content: first.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use").map((b) => ({ type: "tool_result" as const, tool_use_id: b.id, content: result })),
    },
  ];

  it("a Claude-style turn: a forced tool call whose input matches its schema, its tool_result, then the answer in text; the same as through chat completions", async () => {
    const first = await client.messages.create({
      model: MODEL_ID,
      max_tokens: 200,
      system: SYSTEM,
      messages: [{ role: "user", content: QUESTION }],
      tools: [weather],
      tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
      ...greedy,
    });
    expect(first).toMatchObject({ type: "message", role: "assistant", model: MODEL_ID, stop_reason: "tool_use", stop_sequence: null });
    const calls = first.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ id: expect.stringMatching(/^toolu_[\w-]{24}$/), name: "get_weather", caller: { type: "direct" } });
    expect(validInput(calls[0]!.input)).toBe(true);
    // through chat completions, the same greedy request calls with the same arguments and uses the same tokens
    const chatTools = [{ type: "function", function: { name: weather.name, description: weather.description, parameters: weather.input_schema } }];
    const question = [
      { role: "system", content: SYSTEM },
      { role: "user", content: QUESTION },
    ];
    const chatFirst = await viaChat({
      messages: question,
      tools: chatTools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
      max_tokens: 200,
    });
    expect(JSON.parse(chatFirst.choices[0]!.message.tool_calls![0]!.function.arguments)).toEqual(calls[0]!.input);
    expect(first.usage.input_tokens + first.usage.cache_read_input_tokens!).toBe(chatFirst.usage.prompt_tokens);
    expect(first.usage.output_tokens).toBe(chatFirst.usage.completion_tokens);

    const answer = await client.messages.create({ model: MODEL_ID, max_tokens: 8, system: SYSTEM, messages: secondTurn(first, "sunny, 21 C"), tools: [weather], ...greedy });
    expect(answer.content.map((b) => b.type)).toEqual(["text"]);
    const text = (answer.content[0] as Anthropic.TextBlock).text;
    expect(text.length).toBeGreaterThan(0);
    expect(["max_tokens", "end_turn"]).toContain(answer.stop_reason);
    const chatAnswer = await viaChat({
      messages: [
        ...question,
        { role: "assistant", content: null, tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.input) } })) },
        ...calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: "sunny, 21 C" })),
      ],
      tools: chatTools,
      max_tokens: 8,
    });
    expect(text).toBe(chatAnswer.choices[0]!.message.content);
    expect(answer.usage.input_tokens + answer.usage.cache_read_input_tokens!).toBe(chatAnswer.usage.prompt_tokens);
    // the call and its result are in the prompt: longer than the question's by their text at least
    expect(chatAnswer.usage.prompt_tokens).toBeGreaterThan(chatFirst.usage.prompt_tokens + "sunny, 21 C".length);
  });

  it("the same turn streamed: the events in Anthropic's order, the tool input in input_json_delta pieces; the SDK's accumulated message equals the non-streamed one", async () => {
    const request = {
      model: MODEL_ID,
      max_tokens: 200,
      system: SYSTEM,
      messages: [{ role: "user" as const, content: QUESTION }],
      tools: [weather],
      tool_choice: { type: "tool" as const, name: "get_weather" },
      ...greedy,
    };
    const stream = client.messages.stream(request);
    const names: string[] = [];
    const pieces: string[] = [];
    stream.on("streamEvent", (event) => {
      names.push(event.type === "content_block_delta" ? `${event.type}:${event.delta.type}` : event.type);
      if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") pieces.push(event.delta.partial_json);
    });
    const first = await stream.finalMessage();
    expect(names[0]).toBe("message_start");
    expect(names.slice(-2)).toEqual(["message_delta", "message_stop"]);
    expect(names).toContain("content_block_delta:input_json_delta");
    expect(pieces.length).toBeGreaterThan(1);
    const call = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === "tool_use")!;
    expect(JSON.parse(pieces.join(""))).toEqual(call.input);
    expect(first.stop_reason).toBe("tool_use");
    const whole = await client.messages.create(request);
    expect(first.content.map((b) => ({ ...b, id: undefined }))).toEqual(whole.content.map((b) => ({ ...b, id: undefined })));
    expect(first.usage.input_tokens + first.usage.cache_read_input_tokens!).toBe(whole.usage.input_tokens + whole.usage.cache_read_input_tokens!);
    expect(first.usage.output_tokens).toBe(whole.usage.output_tokens);

    // the round trip streamed: the result goes back, the answer streams as text, the same as not streamed
    const second = { model: MODEL_ID, max_tokens: 8, system: SYSTEM, messages: secondTurn(first, "sunny, 21 C"), tools: [weather], ...greedy };
    const answer = await client.messages.stream(second).finalMessage();
    const expected = await client.messages.create(second);
    expect(answer.content).toEqual(expected.content);
    expect((answer.content[0] as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
    expect(answer.stop_reason).toBe(expected.stop_reason);
  });

  it("stop_sequences: the reply ends where one first appears, stop_reason stop_sequence naming it, streamed too; the node stops there (no tokens past it generated or billed) and its slot is freed", async () => {
    const body = { model: MODEL_ID, max_tokens: 24, messages: [{ role: "user" as const, content: "Once upon a time" }], ...greedy };
    const full = ((await client.messages.create(body)).content[0] as Anthropic.TextBlock).text;
    // a stop text from inside the greedy reply, with at least one character before it
    const stop = [...new Set([...full.slice(1)])].map((ch) => full.slice(full.indexOf(ch, 1), full.indexOf(ch, 1) + 2)).find((s) => s.trim().length === 2) ?? full.slice(1, 3);
    expect(stop.length).toBe(2);
    const cut = full.slice(0, full.indexOf(stop));
    // room for a long reply (the noise model does not end by itself): what is billed is what came before the stop
    const long = { ...body, max_tokens: 400 };
    const stopped = await client.messages.create({ ...long, stop_sequences: ["\u0000never", stop] });
    expect(stopped).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: stop, content: cut ? [{ type: "text", text: cut }] : [] });
    expect(stopped.usage.output_tokens).toBeGreaterThan(0);
    expect(stopped.usage.output_tokens).toBeLessThanOrEqual(body.max_tokens); // the stop is within the first 24 tokens' text
    const streamed = await client.messages.stream({ ...long, stop_sequences: [stop] }).finalMessage();
    expect(streamed).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: stop });
    expect(streamed.usage.output_tokens).toBe(stopped.usage.output_tokens);
    expect(streamed.content.map((b) => (b as Anthropic.TextBlock).text).join("")).toBe(cut);
    await until(() => scheduler.fleet.snapshot()[0]!.pools[0]!.inflight === 0, 5000, "the cancelled generations to end");
  });

  it("count_tokens is the input a message of the same conversation is given", async () => {
    const conversation = { model: MODEL_ID, system: SYSTEM, messages: [{ role: "user" as const, content: QUESTION }], tools: [weather] };
    const counted = await client.messages.countTokens(conversation);
    const made = await client.messages.create({ ...conversation, max_tokens: 1 });
    expect(counted.input_tokens).toBe(made.usage.input_tokens + made.usage.cache_read_input_tokens!);
    const alone = await client.messages.countTokens({ model: MODEL_ID, messages: [{ role: "user", content: QUESTION }] });
    expect(alone.input_tokens).toBeLessThan(counted.input_tokens);
  });

  it("what Kiln cannot honour is refused by name, in Anthropic's error shape", async () => {
    const question = { model: MODEL_ID, max_tokens: 8, messages: [{ role: "user" as const, content: QUESTION }] };
    const refusals: [Anthropic.MessageCreateParamsNonStreaming, string][] = [
      [{ ...question, thinking: { type: "enabled", budget_tokens: 1024 } }, "thinking"],
      [{ ...question, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: "https://example.com/a.png" } }] }] }, "messages[0].content[0]"],
      [{ ...question, tools: [{ type: "web_search_20250305", name: "web_search" }] }, "tools[0].type"],
      [{ ...question, service_tier: "auto", container: "c-1" } as Anthropic.MessageCreateParamsNonStreaming, "container"],
    ];
    for (const [body, field] of refusals) {
      const err = await client.messages.create(body).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      const e = err as InstanceType<typeof Anthropic.BadRequestError>;
      expect(e.status).toBe(400);
      expect(e.type).toBe("invalid_request_error");
      expect(e.error).toMatchObject({
        type: "error",
        error: { type: "invalid_request_error", message: expect.stringMatching(new RegExp(`^${field.replace(/[[\].]/g, "\\$&")}: `)) },
      });
      expect(e.headers?.get("x-kiln-error-code")).toBe(field === "messages[0].content[0]" ? "unsupported_content" : "unsupported_parameter");
      expect(e.requestID).toMatch(/\S/);
    }
    const unknown = await client.messages.create({ ...question, model: "claude-sonnet-4-5" }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect((unknown as InstanceType<typeof Anthropic.NotFoundError>).error).toMatchObject({ error: { type: "not_found_error", message: expect.stringMatching(/^model: /) } });
  });

  it("keys in x-api-key (as Claude Code and the SDK's earlier versions send them) and in Authorization: Bearer (this SDK's apiKey and authToken); a wrong, missing or doubled key is Anthropic's 401", async () => {
    const question = { model: MODEL_ID, max_tokens: 2, messages: [{ role: "user" as const, content: "hi" }] };
    const seen: Headers[] = [];
    const watching: typeof fetch = (input, init) => {
      seen.push(new Headers(init?.headers));
      return recording(input, init);
    };
    const clients = {
      // 1.14.0 sends its apiKey as a bearer token; its defaultHeaders are how a client sends x-api-key alone
      header: new Anthropic({ baseURL: base, apiKey: null, authToken: null, defaultHeaders: { "x-api-key": key }, maxRetries: 0, fetch: watching }),
      apiKey: new Anthropic({ baseURL: base, apiKey: key, authToken: null, maxRetries: 0, fetch: watching }),
      authToken: new Anthropic({ baseURL: base, apiKey: null, authToken: key, maxRetries: 0, fetch: watching }),
    };
    for (const c of Object.values(clients)) expect((await c.messages.create(question)).type).toBe("message");
    expect(seen.map((h) => [h.get("x-api-key"), h.get("authorization")])).toEqual([
      [key, null],
      [null, `Bearer ${key}`],
      [null, `Bearer ${key}`],
    ]);

    const wrong = await clients.header
      .withOptions({ defaultHeaders: { "x-api-key": `${key}x` } })
      .messages.create(question)
      .catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((wrong as InstanceType<typeof Anthropic.AuthenticationError>).error).toMatchObject({
      error: { type: "authentication_error", message: expect.stringMatching(/^x-api-key: /) },
    });
    const revoked = await scheduler.keys.create({ account: "gone", tier: "pro" });
    await scheduler.keys.revoke(revoked.id);
    const refused = await clients.apiKey
      .withOptions({ apiKey: revoked.token })
      .messages.create(question)
      .catch((e: unknown) => e);
    expect((refused as InstanceType<typeof Anthropic.AuthenticationError>).error).toMatchObject({
      error: { type: "authentication_error", message: "Authorization: this API key has been revoked" },
    });

    const other = (await scheduler.keys.create({ account: "other", tier: "pro" })).token;
    const post = (headers: Record<string, string>) =>
      recording(`${base}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", "anthropic-version": "2023-06-01", ...headers },
        body: JSON.stringify(question),
      });
    for (const headers of [{}, { "x-api-key": key, authorization: `Bearer ${other}` }] as Record<string, string>[]) {
      const res = await post(headers);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe("authentication_error");
    }
    expect((await post({ "x-api-key": key, authorization: `Bearer ${key}` })).status).toBe(200);
    const badVersion = await post({ "x-api-key": key, "anthropic-version": "latest" });
    expect(badVersion.status).toBe(400);
    expect(((await badVersion.json()) as { error: { message: string } }).error.message).toMatch(/^anthropic-version: /);
    // an unknown route under /v1/messages is Anthropic's 404 too
    const nowhere = await recording(`${base}/v1/messages/batches`, { method: "POST", headers: { "x-api-key": key, "content-type": "application/json" }, body: "{}" });
    expect(nowhere.status).toBe(404);
  });
});

describe("Anthropic's SDK → two agents, one killed mid-stream", () => {
  const agents: KilnProcess[] = [];
  let scheduler: SchedulerHandle;
  afterAll(async () => {
    for (const a of agents) await a.stop("SIGKILL");
    await scheduler?.close();
  });

  it("the stream ends with Anthropic's error event (api_error) the SDK throws; the other agent answers the next request", async () => {
    scheduler = await inProcessScheduler();
    agents.push(spawnAgent(scheduler.grpc.port, "node-a", ["--sequences", "1"]), spawnAgent(scheduler.grpc.port, "node-b", ["--sequences", "1"]));
    await waitForAgents(scheduler, 2);
    const key = (await scheduler.keys.create({ account: "claude", tier: "pro" })).token;
    const client = new Anthropic({ baseURL: httpBase(scheduler), apiKey: key, maxRetries: 0, fetch: recording });

    // a long greedy stream: deterministic, so it cannot sample the end of its turn early and finish first
    const stream = await client.messages.create({ model: MODEL_ID, max_tokens: 2000, stream: true, messages: [{ role: "user", content: "tell me a long story" }], ...greedy });
    const seen: string[] = [];
    let failure: unknown;
    try {
      for await (const event of stream) {
        seen.push(event.type);
        if (seen.filter((t) => t === "content_block_delta").length === 2) {
          const victim = scheduler.fleet.snapshot().find((s) => s.pools[0]!.inflight === 1)!.nodeId;
          agents[victim === "node-a" ? 0 : 1]!.child.kill("SIGKILL");
        }
      }
    } catch (err) {
      failure = err;
    }
    expect(seen.slice(0, 3)).toEqual(["message_start", "content_block_start", "content_block_delta"]);
    expect(seen).not.toContain("message_stop");
    expect(failure).toBeInstanceOf(Anthropic.APIError);
    const err = failure as InstanceType<typeof Anthropic.APIError>;
    expect(err.type).toBe("api_error");
    expect(err.error).toMatchObject({ type: "error", error: { type: "api_error", message: expect.stringMatching(/\S/) }, request_id: expect.any(String) });
    expect(err.headers?.get("request-id")).toBe((err.error as { request_id: string }).request_id);

    await waitForAgents(scheduler, 1);
    const after = await client.messages.create({ model: MODEL_ID, max_tokens: 4, messages: [{ role: "user", content: "still there?" }] });
    expect(after.type).toBe("message");
  });
});

/**
 * OpenAI's Responses API (`POST /v1/responses`) through the official `openai` client against real
 * schedulers and agents on loopback (the fabricated tiny model: its words are noise, its tool calls
 * grammar-constrained JSON): a response and its stream, the same greedy text the chat route gives (one
 * engine path), function tools and a Codex-style turn (a call, its output fed back, the answer
 * streamed), refused fields by name, no stored responses, and an agent killed mid-stream, which ends
 * the stream with the API's `error` event and `response.failed` while the other agent serves on.
 */
import { Ajv } from "ajv";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, spawnAgent, until, waitForAgents, type KilnProcess } from "./helpers/fleet.js";

type Event = OpenAI.Responses.ResponseStreamEvent;

let scheduler: SchedulerHandle;
let agent: AgentHandle;
let client: OpenAI;

beforeAll(async () => {
  scheduler = await inProcessScheduler({ defaultMaxTokens: "24" });
  agent = await inProcessAgent(scheduler);
  await waitForAgents(scheduler, 1);
  const { token } = await scheduler.keys.create({ account: "responses", tier: "pro" });
  client = new OpenAI({ baseURL: `${httpBase(scheduler)}/v1`, apiKey: token, maxRetries: 0 });
}, 60_000);
afterAll(async () => {
  await agent?.close();
  await scheduler?.close();
});

const weather: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", enum: ["Paris", "Rome"] }, days: { type: "integer", enum: [1, 2, 3] } },
    required: ["city", "days"],
    additionalProperties: false,
  },
  strict: true,
};
const validArguments = new Ajv().compile(weather.parameters!);

/** Every event of a streamed response, checked to be numbered from 0 without gaps. */
async function events(stream: AsyncIterable<Event>): Promise<Event[]> {
  const all: Event[] = [];
  for await (const e of stream) all.push(e);
  expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
  return all;
}

describe("POST /v1/responses through the openai client", () => {
  it("a response: the chat route's greedy text for the same conversation, its usage, the settings given back", async () => {
    const r = await client.responses.create({
      model: MODEL_ID,
      instructions: "Be brief.",
      input: "Once upon a time",
      max_output_tokens: 12,
      temperature: 0,
      metadata: { run: "1" },
    });
    const chat = await client.chat.completions.create({
      model: MODEL_ID,
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Once upon a time" },
      ],
      max_tokens: 12,
      temperature: 0,
    });
    expect(r.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(r).toMatchObject({
      object: "response",
      model: MODEL_ID,
      instructions: "Be brief.",
      max_output_tokens: 12,
      temperature: 0,
      metadata: { run: "1" },
      store: false,
      error: null,
    });
    expect(r.output).toHaveLength(1);
    expect(r.output[0]).toMatchObject({ type: "message", role: "assistant", id: expect.stringMatching(/^msg_/) });
    expect(chat.choices[0]!.message.content).not.toBe("");
    expect(r.output_text).toBe(chat.choices[0]!.message.content); // one engine path: the same greedy reply
    expect(r.status).toBe(chat.choices[0]!.finish_reason === "length" ? "incomplete" : "completed");
    expect(r.usage).toEqual({
      input_tokens: chat.usage!.prompt_tokens,
      input_tokens_details: { cached_tokens: expect.any(Number), cache_write_tokens: 0 },
      output_tokens: chat.usage!.completion_tokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: chat.usage!.total_tokens,
    });
  });

  it("input items: developer and user messages with text parts read as the instructions and a string input are", async () => {
    const body = { model: MODEL_ID, max_output_tokens: 8, temperature: 0 };
    const plain = await client.responses.create({ ...body, instructions: "Be brief.", input: "Hello there" });
    const items = await client.responses.create({
      ...body,
      input: [
        { role: "developer", content: "Be brief." },
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "Hello " },
            { type: "input_text", text: "there" },
          ],
        },
      ],
    });
    expect(items.output_text).toBe(plain.output_text);
    expect(items.usage!.input_tokens).toBe(plain.usage!.input_tokens);
  });

  it("streamed: created, in_progress, the message's item and part, its deltas, then done events and the final response; the deltas are the text", async () => {
    const body = { model: MODEL_ID, input: "Once upon a time", max_output_tokens: 10, temperature: 0 };
    const whole = await client.responses.create(body);
    const all = await events(await client.responses.create({ ...body, stream: true }));
    const types = all.map((e) => e.type);
    const deltas = all.filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === "response.output_text.delta");
    expect(types.slice(0, 4)).toEqual(["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
    expect(types.slice(4, 4 + deltas.length).every((t) => t === "response.output_text.delta")).toBe(true);
    expect(types.slice(4 + deltas.length)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      whole.status === "completed" ? "response.completed" : "response.incomplete",
    ]);
    expect(deltas.map((d) => d.delta).join("")).toBe(whole.output_text);
    const last = all.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(last.response.output[0]).toMatchObject({ type: "message", content: [{ type: "output_text", text: whole.output_text }] });
    // the same tokens (the second request finds the first's prompt in the node's KV cache: cached_tokens may differ)
    expect(last.response.usage).toMatchObject({ input_tokens: whole.usage!.input_tokens, output_tokens: whole.usage!.output_tokens, total_tokens: whole.usage!.total_tokens });
  });

  it("text.format json_schema through the grammar: the SDK's stream helper ends with a response whose text validates", async () => {
    const schema = { type: "object", properties: { answer: { enum: ["yes", "no"] }, sure: { type: "boolean" } }, required: ["answer", "sure"], additionalProperties: false };
    const stream = client.responses.stream({
      model: MODEL_ID,
      input: "Answer in JSON",
      max_output_tokens: 64,
      temperature: 1,
      text: { format: { type: "json_schema", name: "verdict", schema, strict: true } },
    });
    const final = await stream.finalResponse();
    expect(final.status).toBe("completed");
    expect(new Ajv().compile(schema)(JSON.parse(final.output_text))).toBe(true);
  });

  it("a Codex-style turn: a function call, its output fed back, the answer streamed; the call and output are in the second prompt", async () => {
    const input: OpenAI.Responses.ResponseInput = [{ role: "user", content: "What is the weather in Paris?" }];
    const first = await client.responses.create({
      model: MODEL_ID,
      instructions: "You are a coding agent.",
      input,
      tools: [weather],
      tool_choice: "required",
      parallel_tool_calls: false,
      max_output_tokens: 200,
    });
    expect(first.status).toBe("completed");
    const calls = first.output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === "function_call");
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ name: "get_weather", call_id: expect.stringMatching(/^call_/), id: expect.stringMatching(/^fc_/), status: "completed" });
    expect(validArguments(JSON.parse(calls[0]!.arguments))).toBe(true);
    expect(first.tools).toEqual([weather]);

    const second = await events(
      await client.responses.create({
        model: MODEL_ID,
        instructions: "You are a coding agent.",
        input: [...input, ...first.output, { type: "function_call_output", call_id: calls[0]!.call_id, output: '{"sky":"clear","celsius":21}' }],
        tools: [weather],
        tool_choice: "auto",
        parallel_tool_calls: false,
        max_output_tokens: 8,
        stream: true,
        store: false,
        include: [],
        prompt_cache_key: "codex-session-1",
      }),
    );
    const end = second.at(-1)!;
    expect(["response.completed", "response.incomplete"]).toContain(end.type);
    const response = (end as OpenAI.Responses.ResponseCompletedEvent).response;
    expect(response.output.length).toBeGreaterThan(0);
    // the call and its output are in the prompt: longer than the first's by their text at least
    expect(response.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + '{"sky":"clear","celsius":21}'.length / 4);
    expect(response.prompt_cache_key).toBe("codex-session-1");
  });

  it("a named function streamed: the call's item, its argument deltas, their done event with the whole arguments; the stream helper rebuilds it", async () => {
    const body = { model: MODEL_ID, input: "Weather in Rome?", tools: [weather], tool_choice: { type: "function" as const, name: "get_weather" }, max_output_tokens: 200 };
    const all = await events(await client.responses.create({ ...body, stream: true }));
    const added = all.find((e) => e.type === "response.output_item.added") as OpenAI.Responses.ResponseOutputItemAddedEvent;
    expect(added.item).toMatchObject({ type: "function_call", name: "get_weather", arguments: "", status: "in_progress" });
    const deltas = all.filter((e): e is OpenAI.Responses.ResponseFunctionCallArgumentsDeltaEvent => e.type === "response.function_call_arguments.delta");
    const done = all.find((e) => e.type === "response.function_call_arguments.done") as OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent;
    expect(deltas.length).toBeGreaterThan(1);
    expect(done.arguments).toBe(deltas.map((d) => d.delta).join(""));
    expect(validArguments(JSON.parse(done.arguments))).toBe(true);
    expect(all.at(-1)!.type).toBe("response.completed");

    const final = await client.responses.stream(body).finalResponse();
    const call = final.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ type: "function_call", name: "get_weather" });
    expect(validArguments(JSON.parse(call.arguments))).toBe(true);
  });

  it.each([
    ["tools[0].type", { tools: [{ type: "web_search" }] }],
    ["tools[0].type", { tools: [{ type: "file_search", vector_store_ids: ["vs_1"] }] }],
    ["store", { store: true }],
    ["previous_response_id", { previous_response_id: "resp_0" }],
    ["reasoning.effort", { reasoning: { effort: "high" } }],
    ["background", { background: true }],
    ["include", { include: ["message.output_text.logprobs"] }],
    ["input[0].content[0].type", { input: [{ role: "user", content: [{ type: "input_image", image_url: "https://example.invalid/cat.png", detail: "auto" }] }] }],
  ])("refuses %s with a 400 naming it, in OpenAI's error shape", async (param, extra) => {
    const err = await client.responses.create({ model: MODEL_ID, input: "hi", ...extra } as OpenAI.Responses.ResponseCreateParamsNonStreaming).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({
      status: 400,
      param,
      type: "invalid_request_error",
      code: param.endsWith(".type") && param.startsWith("input") ? "unsupported_content" : "unsupported_parameter",
    });
  });

  it("nothing is stored: retrieving or deleting a response is a 404 response_not_found", async () => {
    const r = await client.responses.create({ model: MODEL_ID, input: "hi", max_output_tokens: 2 });
    for (const call of [() => client.responses.retrieve(r.id), () => client.responses.delete(r.id)]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect(err).toMatchObject({ status: 404, code: "response_not_found", type: "not_found_error" });
    }
  });
});

describe("an agent killed mid-stream", () => {
  let fleet: SchedulerHandle;
  const agents: Record<string, KilnProcess> = {};
  afterAll(async () => {
    for (const p of Object.values(agents)) await p.stop("SIGKILL");
    await fleet?.close();
  });

  it("the stream ends with the error event and response.failed; the other agent answers the next request", async () => {
    fleet = await inProcessScheduler();
    const { token } = await fleet.keys.create({ account: "killed", tier: "pro" });
    const sdk = new OpenAI({ baseURL: `${httpBase(fleet)}/v1`, apiKey: token, maxRetries: 0 });
    agents["node-a"] = spawnAgent(fleet.grpc.port, "node-a", ["--sequences", "1"]);
    agents["node-b"] = spawnAgent(fleet.grpc.port, "node-b", ["--sequences", "1"]);
    await waitForAgents(fleet, 2);

    // greedy: it cannot sample the end of its turn early
    const stream = await sdk.responses.create({ model: MODEL_ID, input: "tell me a long story", max_output_tokens: 2000, temperature: 0, stream: true });
    const seen: Event[] = [];
    const iterator = stream[Symbol.asyncIterator]();
    while (seen.filter((e) => e.type === "response.output_text.delta").length < 2) seen.push((await iterator.next()).value as Event);
    const victim = fleet.fleet.snapshot().find((s) => s.pools[0]!.inflight === 1)!.nodeId;
    const killedAt = Date.now();
    agents[victim]!.child.kill("SIGKILL");
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) seen.push(r.value);
    expect(Date.now() - killedAt).toBeLessThan(5000);

    expect(seen.map((e) => e.type).slice(-2)).toEqual(["error", "response.failed"]);
    expect(seen.at(-2)).toMatchObject({ type: "error", code: "agent_lost", param: null, message: expect.any(String) });
    const failed = (seen.at(-1) as OpenAI.Responses.ResponseFailedEvent).response;
    expect(failed).toMatchObject({ status: "failed", error: { code: "server_error" }, output: [{ type: "message", status: "incomplete" }] });
    expect(seen.some((e) => e.type === "response.completed")).toBe(false);
    expect(seen.map((e) => e.sequence_number)).toEqual(seen.map((_, i) => i));

    await until(() => fleet.fleet.snapshot().length === 1, 10_000, "the killed agent to leave");
    const next = await sdk.responses.create({ model: MODEL_ID, input: "and then?", max_output_tokens: 4 });
    expect(["completed", "incomplete"]).toContain(next.status);
  });
});

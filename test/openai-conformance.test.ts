/**
 * Conformance with OpenAI's published schemas: every answer shape of the scheduler's OpenAI routes,
 * as real requests get them from an in-process scheduler and agent on loopback, validated against the
 * component schemas of OpenAI's own OpenAPI document (github.com/openai/openai-openapi), vendored in
 * test/fixtures/openai (README.md there: the source commit, the licence, and how the document is read).
 * First: the vendored subset is whole and says where it comes from.
 *
 * Shapes: chat completions (plain and with a call) and their stream chunks, legacy completions and
 * their chunks, embeddings, models (one and the list), errors (every code's body as its status's
 * class makes it, with the registry's type; 400/401/404/413/429/503 on the wire; an unexpected
 * failure's 500 from the error handler), audio json and verbose_json (transcriptions and
 * translations) and transcription stream events, and the Responses API (a response, a call, every
 * stream event, the failure events). Where the document and OpenAI's wire differ, the case says so
 * where it allows for it.
 */
import { readFileSync } from "node:fs";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import { ERROR_CODES, type ErrorCode } from "../core/error-codes.js";
import {
  ApiError,
  AuthenticationError,
  ConflictError,
  InsufficientStorageError,
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionError,
  ServiceUnavailableError,
  TooManyRequestsError,
  UpstreamError,
} from "../core/errors.js";
import { onError, type RequestIdEnv } from "../core/http/index.js";
import { createLogger } from "../core/log.js";
import { ResponseWriter } from "../scheduler/chat/responses.js";
import { validateResponses } from "../scheduler/chat/responses-schema.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { SUBSET, violations } from "./fixtures/openai/conformance.js";
import { closure, ROOTS, type RootName } from "./fixtures/openai/extract.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, tempDir, until, waitForAgents } from "./helpers/fleet.js";
import { makeMedia, QUICK_SPEECH_SECONDS, TEST_VAD, TEST_WHISPER_DIR } from "./helpers/speech.js";

/** Checks `value` against the document's schema `name`; a failure names the shape, the value and the first errors. */
function conforms(name: RootName, value: unknown, what: string = name): void {
  const errors = violations(name, value);
  expect(errors, `${what} breaks OpenAI's ${name}:\n${errors.join("\n")}\n${JSON.stringify(value).slice(0, 600)}`).toEqual([]);
}

/** An error answer: OpenAI's ErrorResponse, `{"error": Error}`. */
function conformsError(body: unknown, what: string): void {
  conforms("ErrorResponse", body, what);
}

const sseData = (text: string): unknown[] =>
  text
    .split("\n\n")
    .map((e) => e.split("\n").find((l) => l.startsWith("data: ")))
    .filter((l): l is string => l !== undefined && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice("data: ".length)) as unknown);

describe("the vendored schemas", () => {
  it("are OpenAI's published document's, at a named commit, with every schema their $refs reach and no other", () => {
    expect(SUBSET.source).toMatchObject({ repository: "https://github.com/openai/openai-openapi", file: "openapi.json", openapi: expect.stringMatching(/^3\.1\./) });
    expect(SUBSET.source.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(readFileSync(new URL("./fixtures/openai/LICENSE", import.meta.url), "utf8")).toMatch(/^The MIT License\b[\s\S]*Copyright \(c\) OpenAI/);
    expect(SUBSET.roots).toEqual([...ROOTS]);
    expect(closure(SUBSET.components.schemas, ROOTS)).toEqual(Object.keys(SUBSET.components.schemas));
  });

  it("catch what the issue names: an error without param, a chunk's null fingerprint, a segment without tokens", () => {
    const check = (name: RootName, value: unknown) => violations(name, value).length === 0;
    expect(check("Error", { message: "m", type: "t", code: "c" })).toBe(false);
    expect(check("Error", { message: "m", type: "t", code: "c", param: null })).toBe(true);
    const chunk = { id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: null }] };
    expect(check("CreateChatCompletionStreamResponse", { ...chunk, system_fingerprint: null })).toBe(false);
    expect(check("CreateChatCompletionStreamResponse", chunk)).toBe(true); // finish_reason null: the document's `nullable`, read
    const segment = { id: 0, seek: 0, start: 0, end: 1, text: "x", avg_logprob: 0, compression_ratio: 1, temperature: 0, no_speech_prob: 0 };
    const verbose = (s: unknown) => ({ duration: 1, language: "english", text: "x", segments: [s] });
    expect(check("CreateTranscriptionResponseVerboseJson", verbose(segment))).toBe(false);
    expect(check("CreateTranscriptionResponseVerboseJson", verbose({ ...segment, tokens: [] }))).toBe(true);
  });
});

describe("every error status", () => {
  /** What the product throws for each status (500: ApiError itself, as the MCP sandbox's failure; an unexpected failure's body below). */
  const CLASS_OF: Partial<Record<number, (code: ErrorCode) => ApiError>> = {
    400: (code) => new InvalidRequestError(code, "temperature: expected a number"),
    401: (code) => new AuthenticationError(code, `${code}: what happened`),
    403: (code) => new PermissionError(code, `${code}: what happened`),
    404: (code) => new NotFoundError(code, `${code}: what happened`),
    409: (code) => new ConflictError(code, `${code}: what happened`),
    413: (code) => new PayloadTooLargeError(code, `${code}: what happened`),
    429: (code) => new TooManyRequestsError(code, `${code}: what happened`),
    502: (code) => new UpstreamError(code, `${code}: what happened`),
    503: (code) => new ServiceUnavailableError(code, `${code}: what happened`),
    507: () => new InsufficientStorageError("insufficient_storage: what happened"),
    500: (code) => new ApiError(500, "server_error", code, `${code}: what happened`),
  };
  it.each(Object.entries(ERROR_CODES).filter(([, info]) => info.status !== null))("%s's body, from its status's class, with the registry's type", (code, info) => {
    const body = CLASS_OF[info.status!]!(code as ErrorCode).toBody();
    expect(body.error.type).toBe(info.type);
    conformsError(body, code);
  });

  it("500: an unexpected failure's body", async () => {
    const app = new Hono<RequestIdEnv>().onError(onError(createLogger("test", "silent")));
    app.get("/", () => {
      throw new Error("boom");
    });
    const res = await app.request("/");
    expect(res.status).toBe(500);
    conformsError(await res.json(), "500");
  });
});

describe("answers of a real scheduler and agent", () => {
  let scheduler: SchedulerHandle;
  let agent: AgentHandle;
  let base: string;
  let headers: Record<string, string>;
  const media = tempDir();

  beforeAll(async () => {
    scheduler = await inProcessScheduler({ maxBody: "64kb" });
    agent = await inProcessAgent(scheduler, { whisperDir: TEST_WHISPER_DIR, vadModel: TEST_VAD, asrParallel: "1", asrThreads: "1", asrJobs: "1" });
    await waitForAgents(scheduler, 1);
    await until(() => scheduler.fleet.transcriptionModels().includes("whisper-1"), 15_000, "the agent's whisper");
    base = `${httpBase(scheduler)}/v1`;
    headers = { authorization: `Bearer ${(await scheduler.keys.create({ account: "conformance", tier: "pro" })).token}`, "content-type": "application/json" };
  }, 60_000);
  afterAll(async () => {
    await agent?.close();
    await scheduler?.close();
  });

  const post = (path: string, body: unknown, h: Record<string, string> = headers) => fetch(`${base}${path}`, { method: "POST", headers: h, body: JSON.stringify(body) });
  const user = [{ role: "user", content: "Once upon a time" }];
  const tool = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } }, required: ["zone"] } } };

  it("chat completions, plain and with a call, and every chunk of their streams (usage included)", async () => {
    conforms("CreateChatCompletionResponse", await (await post("/chat/completions", { model: MODEL_ID, messages: user, max_tokens: 4 })).json());
    const called = { model: MODEL_ID, messages: user, tools: [tool], tool_choice: "required", max_tokens: 64 };
    conforms("CreateChatCompletionResponse", await (await post("/chat/completions", called)).json(), "a chat completion with a call");
    for (const body of [
      { model: MODEL_ID, messages: user, max_tokens: 4, stream: true, stream_options: { include_usage: true } },
      { model: MODEL_ID, messages: user, max_tokens: 4, stream: true, logprobs: true, top_logprobs: 2 },
      { ...called, stream: true },
    ]) {
      const chunks = sseData(await (await post("/chat/completions", body)).text());
      expect(chunks.length).toBeGreaterThan(2);
      for (const [i, chunk] of chunks.entries()) conforms("CreateChatCompletionStreamResponse", chunk, `chunk ${i}`);
    }
  });

  it("legacy completions and their chunks", async () => {
    for (const extra of [{}, { logprobs: 2 }, { echo: true }])
      conforms("CreateCompletionResponse", await (await post("/completions", { model: MODEL_ID, prompt: "Once", max_tokens: 3, ...extra })).json());
    const chunks = sseData(await (await post("/completions", { model: MODEL_ID, prompt: "Once", max_tokens: 3, stream: true, stream_options: { include_usage: true } })).text());
    // The document has one CreateCompletionResponse for the answer and its chunks, its finish_reason never
    // null; OpenAI's own stream sends null before the last chunk, as Kiln's does (a client reads the key).
    const finished = (chunk: unknown) => {
      const c = structuredClone(chunk) as { choices: { finish_reason: string | null }[] };
      for (const choice of c.choices) choice.finish_reason ??= "stop";
      return c;
    };
    for (const [i, chunk] of chunks.entries()) conforms("CreateCompletionResponse", finished(chunk), `chunk ${i}`);
  });

  it("embeddings (floats: the document's Embedding has no base64 string) and models", async () => {
    conforms("CreateEmbeddingResponse", await (await post("/embeddings", { model: MODEL_ID, input: ["a", "b"] })).json());
    const list = (await (await fetch(`${base}/models`, { headers })).json()) as { data: unknown[] };
    conforms("ListModelsResponse", list);
    expect(list.data.length).toBeGreaterThan(0);
    conforms("Model", await (await fetch(`${base}/models/${MODEL_ID}`, { headers })).json());
  });

  it("errors on the wire: 400, 401, 404, 413, 429, 503", async () => {
    const cases: [number, Promise<Response>][] = [
      [400, post("/chat/completions", { model: MODEL_ID, messages: user, temperature: 3 })],
      [401, post("/chat/completions", { model: MODEL_ID, messages: user }, { "content-type": "application/json" })],
      [404, fetch(`${base}/no/such/route`, { headers })],
      [404, fetch(`${base}/models/no-such-model`, { headers })],
      [404, fetch(`${base}/responses/resp_123`, { headers })],
      [413, post("/chat/completions", { model: MODEL_ID, messages: [{ role: "user", content: "x".repeat(70_000) }] })],
      [503, post("/chat/completions", { model: "famE-code-fast-1", messages: user })], // a built-in id no agent serves
    ];
    const limited = { ...headers, authorization: `Bearer ${(await scheduler.keys.create({ account: "conformance-rpm", tier: "pro", rpm: 1 })).token}` };
    await fetch(`${base}/models`, { headers: limited });
    cases.push([429, fetch(`${base}/models`, { headers: limited })]);
    for (const [status, answer] of cases) {
      const res = await answer;
      expect(res.status).toBe(status);
      conformsError(await res.json(), `${status} ${res.url}`);
    }
  });

  it("audio: json and verbose_json of transcriptions and translations, and the transcription's stream events", async () => {
    const audio = readFileSync(makeMedia(media, "speech.mp3", { seconds: QUICK_SPEECH_SECONDS }));
    const form = (fields: Record<string, string>) => {
      const f = new FormData();
      for (const [k, v] of Object.entries(fields)) f.append(k, v);
      f.append("file", new Blob([audio]), "speech.mp3");
      return f;
    };
    const send = (task: string, fields: Record<string, string>) =>
      fetch(`${base}/audio/${task}`, {
        method: "POST",
        headers: { authorization: headers.authorization! },
        body: form({ model: "whisper-1", temperature_increment: "0", ...fields }),
      });
    conforms("CreateTranscriptionResponseJson", await (await send("transcriptions", {})).json());
    conforms("CreateTranscriptionResponseVerboseJson", await (await send("transcriptions", { response_format: "verbose_json", "timestamp_granularities[]": "word" })).json());
    // the stand-ins for what whisper does not give the scheduler (docs/openai-api.md#audio): no token ids, the request's first temperature, not measured
    const hot = (await (await send("transcriptions", { response_format: "verbose_json", temperature: "0.4" })).json()) as { segments: Record<string, unknown>[] };
    expect(hot.segments.length).toBeGreaterThan(0);
    for (const segment of hot.segments) expect(segment).toMatchObject({ tokens: [], temperature: 0.4, no_speech_prob: 0 });
    conforms("CreateTranslationResponseJson", await (await send("translations", {})).json());
    conforms("CreateTranslationResponseVerboseJson", await (await send("translations", { response_format: "verbose_json" })).json());
    const events = sseData(await (await send("transcriptions", { stream: "true" })).text());
    expect(events.length).toBeGreaterThan(1);
    for (const [i, event] of events.entries()) conforms("CreateTranscriptionResponseStreamEvent", event, `transcription event ${i}`);
  }, 120_000);

  it("the Responses API: a response, one with a call, every event of their streams", async () => {
    const fn = { type: "function", name: "get_time", parameters: tool.function.parameters, strict: true };
    const bodies = [
      { model: MODEL_ID, instructions: "Be brief.", input: "Once upon a time", max_output_tokens: 6, metadata: { a: "b" }, user: "u" },
      { model: MODEL_ID, input: [{ role: "user", content: [{ type: "input_text", text: "time?" }] }], tools: [fn], tool_choice: "required", max_output_tokens: 64 },
      {
        model: MODEL_ID,
        input: "Answer",
        max_output_tokens: 64,
        text: { format: { type: "json_schema", name: "a", schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false } } },
      },
    ];
    for (const body of bodies) {
      conforms("Response", await (await post("/responses", body)).json());
      const events = sseData(await (await post("/responses", { ...body, stream: true })).text());
      expect(events.length).toBeGreaterThan(4);
      for (const [i, event] of events.entries()) conforms("ResponseStreamEvent", event, `event ${i} (${(event as { type: string }).type})`);
    }
  });
});

describe("the Responses API's failure events", () => {
  it("error and response.failed, as a stream ends when its agent is lost", () => {
    const body = validateResponses({ model: MODEL_ID, input: "x" });
    const writer = new ResponseWriter({ id: "resp_1", createdAt: 1, model: MODEL_ID }, body.echo);
    const events = [...writer.start(), ...writer.generated("partial"), ...writer.fail({ code: "agent_lost", message: "the node went away" })];
    for (const event of events) conforms("ResponseStreamEvent", event, event.type);
  });
});

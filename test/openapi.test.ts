/**
 * `GET /v1/openapi.json`: served without a key by a real scheduler, valid OpenAPI 3.1 by a real
 * validator, listing every route the HTTP app has, and describing real answers (a chat completion's
 * body parses with the document's own schema).
 */
import { TokenQuota } from "../scheduler/ratelimit/index.js";
import { DEFAULT_TOKENS_PER_DAY, DEFAULT_TOKENS_PER_MINUTE } from "../config/index.js";
import { UsageLedger } from "../scheduler/usage/index.js";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../core/log.js";
import { KeyService } from "../scheduler/auth/index.js";
import { ModelCatalog } from "../scheduler/catalog/index.js";
import { Fleet } from "../scheduler/fleet/index.js";
import { createHttpApp } from "../scheduler/http/index.js";
import { ChatCompletionChunk, ChatCompletionResponse, EmbeddingList, ModelList, TextCompletion } from "../scheduler/http/openapi.js";
import { AccountSecrets, EgressPolicy, McpService, McpStore } from "../scheduler/mcp/index.js";
import { createSchedulerMetrics } from "../scheduler/metrics.js";
import { InflightLimiter, MemoryTokenCounter, RateLimiter } from "../scheduler/ratelimit/index.js";
import { SqliteStore } from "../scheduler/store/sqlite.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import type { AgentHandle } from "../agent/index.js";
import { inProcessAgent, inProcessScheduler, MODEL_ID, tempDir, waitForAgents } from "./helpers/fleet.js";

/** The scheduler's HTTP app with every part switched on (the admin API included), not listening. */
async function fullApp() {
  const logger = createLogger("test", "silent");
  const db = new SqliteStore(join(tempDir(), "kiln.db")); // routes are listed, never called: the engine does not matter
  const fleet = new Fleet({ queueSize: 1, queueTimeoutMs: 1000, heartbeatMs: 60_000, logger });
  const usage = new UsageLedger(db, { logger });
  const mcp = new McpService({
    store: new McpStore(db),
    secrets: new AccountSecrets(db, randomBytes(32)),
    egress: new EgressPolicy(),
    timeoutMs: 1000,
    concurrency: 1,
    totalConcurrency: 1,
    sandbox: { memoryBytes: 256 * 2 ** 20, readBytes: 2 ** 20 },
    logger,
  });
  const catalog = await ModelCatalog.open({ store: db, logger });
  const app = createHttpApp({
    keys: await KeyService.open(db),
    catalog,
    limiter: new RateLimiter(),
    inflight: new InflightLimiter(),
    maxInflight: { free: 1, standard: 1, pro: 1, enterprise: 1 },
    fleet,
    logger,
    maxBodyBytes: 1 << 20,
    standardRpm: 60,
    metrics: createSchedulerMetrics(fleet),
    mcp,
    adminToken: "a".repeat(32),
    ready: () => ({ ready: true, checks: {} }),
    audio: { spoolDir: tempDir(), maxFileBytes: 1 << 20, maxUploads: 1, maxUploadsPerAccount: 1 },
    usage,
    tokens: new TokenQuota({ perMinute: DEFAULT_TOKENS_PER_MINUTE, perDay: DEFAULT_TOKENS_PER_DAY, counter: new MemoryTokenCounter({ usedOn: () => 0 }) }),
  });
  return {
    app,
    close: async () => {
      fleet.close();
      catalog.close();
      await usage.close();
      await db.close();
    },
  };
}

type Document = { openapi: string; paths: Record<string, Record<string, unknown>> };

let scheduler: SchedulerHandle;
let agent: AgentHandle;
let doc: Document;

beforeAll(async () => {
  scheduler = await inProcessScheduler();
  agent = await inProcessAgent(scheduler);
  await waitForAgents(scheduler, 1);
  const res = await fetch(`http://127.0.0.1:${scheduler.http.port}/v1/openapi.json`); // no key
  expect(res.status).toBe(200);
  doc = (await res.json()) as Document;
}, 60_000);
afterAll(async () => {
  await agent?.close();
  await scheduler?.close();
});

describe("GET /v1/openapi.json", () => {
  it("is a valid OpenAPI 3.1 document by a real validator", async () => {
    expect(doc.openapi).toBe("3.1.0");
    const result = await new Validator().validate(doc);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
  });

  it("lists every route of the HTTP app, with its method", async () => {
    const { app, close } = await fullApp();
    try {
      const served = app.routes
        .filter((r) => r.method !== "ALL") // middleware
        .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/\/$/, "").replace(/:(\w+)(\{[^}]*\})?/g, "{$1}") || "/"}`);
      const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method} ${path}`));
      expect(served.length).toBeGreaterThan(25);
      expect(new Set(served)).toEqual(new Set(documented));
    } finally {
      await close();
    }
  });

  it("documents the chat request from the schema validation runs: its fields, refusals and extensions", () => {
    const schema = (doc.paths["/v1/chat/completions"]!.post as { requestBody: { content: { "application/json": { schema: { $ref: string } } } } }).requestBody.content[
      "application/json"
    ].schema;
    const request = (doc as unknown as { components: { schemas: Record<string, { properties: Record<string, { description?: string; maximum?: number }>; required: string[] }> } })
      .components.schemas[schema.$ref.split("/").at(-1)!]!;
    expect(request.required).toEqual(["model", "messages"]);
    expect(request.properties.temperature!.maximum).toBe(2);
    expect(request.properties.top_k!.description).toMatch(/llama\.cpp extension/);
    expect(request.properties.audio!.description).toMatch(/refused with 400 unsupported_parameter/);
  });

  it("describes what the routes answer: a real completion and model list parse with the document's schemas", async () => {
    const { token } = await scheduler.keys.create({ account: "openapi", tier: "standard" });
    const base = `http://127.0.0.1:${scheduler.http.port}/v1`;
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const completion = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 3 }),
    });
    expect(completion.status).toBe(200);
    expect(ChatCompletionResponse.safeParse(await completion.json()).error).toBeUndefined();
    const streamed = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 3, stream: true, stream_options: { include_usage: true } }),
    });
    const events = (await streamed.text())
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice("data: ".length)) as unknown);
    expect(events.length).toBeGreaterThan(2);
    for (const event of events) expect(ChatCompletionChunk.safeParse(event).error).toBeUndefined();
    const tools = [{ type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } } } } }];
    const called = { model: MODEL_ID, messages: [{ role: "user", content: "time?" }], tools, tool_choice: "required", max_tokens: 64 };
    const call = (await (await fetch(`${base}/chat/completions`, { method: "POST", headers, body: JSON.stringify(called) })).json()) as { choices: { finish_reason: string }[] };
    expect(call.choices[0]!.finish_reason).toBe("tool_calls");
    expect(ChatCompletionResponse.safeParse(call).error).toBeUndefined();
    const callEvents = (await (await fetch(`${base}/chat/completions`, { method: "POST", headers, body: JSON.stringify({ ...called, stream: true }) })).text())
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice("data: ".length)) as { choices: { delta: { tool_calls?: unknown[] } }[] });
    expect(callEvents.some((e) => e.choices[0]?.delta.tool_calls)).toBe(true);
    for (const event of callEvents) expect(ChatCompletionChunk.safeParse(event).error).toBeUndefined();
    for (const extra of [{ logprobs: 1 }, { echo: true }]) {
      const legacy = await fetch(`${base}/completions`, { method: "POST", headers, body: JSON.stringify({ model: MODEL_ID, prompt: "Once", max_tokens: 3, ...extra }) });
      expect(TextCompletion.safeParse(await legacy.json()).error).toBeUndefined();
    }
    const legacyStream = await fetch(`${base}/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: MODEL_ID, prompt: "Once", max_tokens: 3, stream: true, stream_options: { include_usage: true } }),
    });
    const legacyEvents = (await legacyStream.text())
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice("data: ".length)) as unknown);
    for (const event of legacyEvents) expect(TextCompletion.safeParse(event).error).toBeUndefined();
    for (const encoding_format of ["float", "base64"]) {
      const embeddings = await fetch(`${base}/embeddings`, { method: "POST", headers, body: JSON.stringify({ model: MODEL_ID, input: ["a", "b"], encoding_format }) });
      expect(EmbeddingList.safeParse(await embeddings.json()).error).toBeUndefined();
    }
    const models = await fetch(`${base}/models`, { headers });
    expect(ModelList.safeParse(await models.json()).error).toBeUndefined();
  });
});

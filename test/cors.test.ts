/** CORS for browser clients (`--cors-origin`): off by default; on, the allowed origins only, preflights answered before the key is asked for. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseSchedulerConfig } from "../config/index.js";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { inProcessAgent, inProcessScheduler, MODEL_ID, NODE_TOKEN, waitForAgents } from "./helpers/fleet.js";

const APP = "https://app.example.com";
let open: SchedulerHandle;
let closed: SchedulerHandle;
let agent: AgentHandle;
let key: string;

beforeAll(async () => {
  open = await inProcessScheduler({ corsOrigin: `${APP},http://localhost:3000` });
  closed = await inProcessScheduler();
  agent = await inProcessAgent(open);
  await waitForAgents(open, 1);
  key = (await open.keys.create({ account: "browser", tier: "standard" })).token;
}, 60_000);
afterAll(async () => {
  await agent?.close();
  await open?.close();
  await closed?.close();
});

const url = (s: SchedulerHandle, path: string) => `http://127.0.0.1:${s.http.port}${path}`;
/** A browser's preflight for what the openai SDK sends from a page. */
const SDK_HEADERS =
  "authorization,content-type,x-stainless-os,x-stainless-arch,x-stainless-lang,x-stainless-runtime,x-stainless-retry-count,x-stainless-timeout,openai-organization";
const preflight = (s: SchedulerHandle, origin: string) =>
  fetch(url(s, "/v1/chat/completions"), {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": SDK_HEADERS },
  });

describe("--cors-origin", () => {
  it("answers an allowed origin's preflight without a key, allowing the headers the openai SDK sends from a browser, never credentials", async () => {
    const res = await preflight(open, APP);
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP);
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
    const allowed = res.headers
      .get("access-control-allow-headers")!
      .toLowerCase()
      .split(/\s*,\s*/);
    for (const header of SDK_HEADERS.split(",")) expect(allowed).toContain(header); // the openai SDK's own headers too
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
  });

  it("lets an allowed origin read the answer and its headers, an error's too; another origin gets no grant", async () => {
    const body = JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 2, future: 1 });
    const ok = await fetch(url(open, "/v1/chat/completions"), {
      method: "POST",
      headers: { origin: APP, authorization: `Bearer ${key}`, "content-type": "application/json" },
      body,
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("access-control-allow-origin")).toBe(APP);
    expect(ok.headers.get("access-control-expose-headers")).toContain("x-kiln-ignored-fields");
    const unauthorized = await fetch(url(open, "/v1/models"), { headers: { origin: APP } });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get("access-control-allow-origin")).toBe(APP);
    const stranger = await fetch(url(open, "/v1/models"), { headers: { origin: "https://evil.example", authorization: `Bearer ${key}` } });
    expect(stranger.headers.get("access-control-allow-origin")).toBeNull();
    expect((await preflight(open, "https://evil.example")).headers.get("access-control-allow-origin")).toBeNull();
  });

  it("grants a streamed answer (chat completions, Anthropic messages) to an allowed origin, with its exposed headers and Vary: Origin", async () => {
    const chat = await fetch(url(open, "/v1/chat/completions"), {
      method: "POST",
      headers: { origin: APP, authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 2, stream: true }),
    });
    const messages = await fetch(url(open, "/v1/messages"), {
      method: "POST",
      headers: { origin: APP, "x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 2, stream: true }),
    });
    for (const res of [chat, messages]) {
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/event-stream");
      expect(res.headers.get("access-control-allow-origin")).toBe(APP);
      expect(res.headers.get("access-control-expose-headers")).toContain("x-request-id");
      expect(res.headers.get("vary")).toContain("Origin");
      expect(res.headers.get("x-request-id")).toBeTruthy();
      expect(await res.text()).toMatch(/\n\n$/);
    }
  });

  it("is off by default: no CORS header at all", async () => {
    const res = await preflight(closed, APP);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const get = await fetch(url(closed, "/v1/openapi.json"), { headers: { origin: APP } });
    expect(get.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("refuses an origin that is not one (a path, a scheme other than http(s), a bare host)", () => {
    for (const bad of ["https://app.example.com/", "https://app.example.com/path", "ftp://x.example", "app.example.com", "null"]) {
      expect(() => parseSchedulerConfig({ nodeTokens: NODE_TOKEN, corsOrigin: bad }), bad).toThrow(/--cors-origin \/ KILN_CORS_ORIGIN: expected \* or an origin/);
    }
    expect(parseSchedulerConfig({ nodeTokens: NODE_TOKEN, corsOrigin: "*" }).corsOrigin).toEqual(["*"]);
  });
});

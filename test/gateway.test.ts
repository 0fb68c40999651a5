/**
 * The gateway's answers on the wire, as a client reads them, against a real scheduler (no agent):
 * the response headers the middleware sets (they go on Node's response, not through Hono's
 * `Headers`: scheduler/http/headers.ts) arrive on every kind of answer, once each, under the names
 * they always had; and a completion's place in flight, held from its arrival, comes back when its
 * client leaves in the middle of its body (the request's abort signal is made only after
 * validation now).
 */
import { request } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SchedulerHandle } from "../scheduler/index.js";
import { inProcessScheduler, MODEL_ID, until } from "./helpers/fleet.js";

let scheduler: SchedulerHandle;
let port: number;

beforeAll(async () => {
  scheduler = await inProcessScheduler({ maxInflight: "standard=1", standardRpm: "100000", queueTimeout: "1" });
  port = scheduler.http.port;
});
afterAll(() => scheduler?.close());

interface Answer {
  status: number;
  /** Header names as sent, lower-cased by the server or not, each with its values. */
  raw: [string, string][];
  body: { error?: { code: string } } & Record<string, unknown>;
}

/** One request over node:http, which keeps the header names as the server wrote them. */
function send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => {
        const raw: [string, string][] = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2) raw.push([res.rawHeaders[i]!, res.rawHeaders[i + 1]!]);
        resolve({ status: res.statusCode!, raw, body: JSON.parse(text) as Answer["body"] });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

const chat = (key: string | undefined, body: unknown, extra: Record<string, string> = {}) =>
  send("POST", "/v1/chat/completions", { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}), ...extra }, JSON.stringify(body));

/** The one value of header `name` (sent exactly once; in lower case, as Kiln names its own, unless `anyCase`), or a failure saying how it came. */
function header(a: Answer, name: string, anyCase = false): string {
  const found = a.raw.filter(([k]) => k.toLowerCase() === name);
  expect(found, `${name} in ${JSON.stringify(a.raw)}`).toHaveLength(1);
  if (!anyCase) expect(found[0]![0]).toBe(name);
  return found[0]![1];
}

describe("headers on the wire", () => {
  it("a 401: x-request-id (the caller's when sane, else a new one) and www-authenticate, with the JSON body", async () => {
    const given = await chat(undefined, { model: MODEL_ID, messages: [] }, { "x-request-id": "req-42.a:b" });
    expect(given.status).toBe(401);
    expect(given.body.error?.code).toBe("missing_api_key");
    expect(header(given, "x-request-id")).toBe("req-42.a:b");
    expect(header(given, "www-authenticate")).toBe('Bearer realm="kiln"');
    expect(header(given, "content-type", true)).toBe("application/json"); // Hono's own name for it: Content-Type
    const made = await chat(undefined, { model: MODEL_ID, messages: [] }, { "x-request-id": "not sane!" });
    expect(header(made, "x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("GET /v1/models and a rejected chat request (400): the request id and the rate-limit headers", async () => {
    const { token } = await scheduler.keys.create({ account: "gw-headers", tier: "pro" });
    for (const a of [await send("GET", "/v1/models", { authorization: `Bearer ${token}` }), await chat(token, { model: MODEL_ID, messages: [] })]) {
      expect(header(a, "x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      expect(header(a, "x-ratelimit-limit-requests")).toBe("1000");
      expect(Number(header(a, "x-ratelimit-remaining-requests"))).toBeLessThan(1000);
      expect(header(a, "x-ratelimit-reset-requests")).toMatch(/^\d+s$/);
    }
    const rejected = await chat(token, { model: MODEL_ID, messages: [] });
    expect([rejected.status, rejected.body.error?.code]).toEqual([400, "invalid_messages"]);
  });

  it("a 429 past the account's rate: Retry-After and the limit headers, once each", async () => {
    const { token } = await scheduler.keys.create({ account: "gw-rate", tier: "enterprise", rpm: 2 });
    for (let i = 0; i < 2; i++) expect((await send("GET", "/v1/models", { authorization: `Bearer ${token}` })).status).toBe(200);
    const refused = await send("GET", "/v1/models", { authorization: `Bearer ${token}` });
    expect([refused.status, refused.body.error?.code]).toEqual([429, "rate_limit_exceeded"]);
    expect(Number(header(refused, "retry-after"))).toBeGreaterThanOrEqual(1);
    expect(header(refused, "x-ratelimit-limit-requests")).toBe("2");
    expect(header(refused, "x-ratelimit-remaining-requests")).toBe("0");
    header(refused, "x-request-id");
  });

  it("a request refused after its validation keeps the headers set before (x-kiln-ignored-fields, the limits)", async () => {
    const { token } = await scheduler.keys.create({ account: "gw-ignored", tier: "pro" });
    const a = await chat(token, { model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 2, a_future_field: 1 });
    expect(a.status).toBeGreaterThanOrEqual(500); // no agent serves it
    expect(header(a, "x-kiln-ignored-fields")).toBe("a_future_field");
    expect(header(a, "x-ratelimit-limit-requests")).toBe("1000");
  });
});

describe("a completion's place in flight", () => {
  it("is held from the request's arrival and comes back when its client leaves in the middle of the body", async () => {
    const { token } = await scheduler.keys.create({ account: "gw-inflight", tier: "standard" });
    const socket = connect(port, "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    // headers and the start of a 1000-byte body, then nothing: the request holds the account's one place
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":`);
    await until(async () => (await chat(token, { model: MODEL_ID, messages: [] })).status === 429, 5000, "the half-sent request to hold the place");
    const held = await chat(token, { model: MODEL_ID, messages: [] });
    expect([held.status, held.body.error?.code]).toEqual([429, "too_many_requests_in_flight"]);
    socket.destroy();
    await until(async () => (await chat(token, { model: MODEL_ID, messages: [] })).status === 400, 5000, "the place to come back");
  });
});

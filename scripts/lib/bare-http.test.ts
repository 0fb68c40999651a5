/** The bare server bench-gateway's `--bare` mode measures the scheduler against: it gives back what it was given, and nothing else. */
import { describe, expect, it } from "vitest";
import { serveBare } from "./bare-http.js";

describe("bare-http (bench-gateway's floor)", () => {
  it("answers each recorded request with its status, content type and body, byte for byte, by method, path and whether Authorization is sent", async () => {
    const body = JSON.stringify({ error: { message: "messages: é", type: "invalid_request_error", code: "invalid_messages", param: "messages" } });
    const { port, close } = await serveBare([
      { method: "POST", path: "/v1/chat/completions", authorized: true, status: 400, contentType: "application/json", body },
      { method: "POST", path: "/v1/chat/completions", authorized: false, status: 401, contentType: "application/json", body: "{}" },
      { method: "GET", path: "/v1/models", authorized: true, status: 200, contentType: "application/json", body: '{"object":"list"}' },
    ]);
    const base = `http://127.0.0.1:${port}`;
    const rejected = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { authorization: "Bearer k" }, body: "x".repeat(100_000) });
    expect(rejected.status).toBe(400);
    expect(rejected.headers.get("content-type")).toBe("application/json");
    expect(Buffer.from(await rejected.arrayBuffer()).equals(Buffer.from(body))).toBe(true);
    const noKey = await fetch(`${base}/v1/chat/completions`, { method: "POST", body: "{}" });
    expect([noKey.status, await noKey.text()]).toEqual([401, "{}"]);
    const models = await fetch(`${base}/v1/models`, { headers: { authorization: "Bearer k" } });
    expect([models.status, await models.text()]).toEqual([200, '{"object":"list"}']);
    expect((await fetch(`${base}/v1/models`)).status).toBe(404); // nothing it was not given
    close();
  });
});

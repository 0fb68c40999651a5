/** `readJsonBody` over a real Node HTTP server (the adapter's `IncomingMessage` path) and over `app.request` (the web stream path). */
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Hono } from "hono";
import { onError } from "./errors.js";
import type { RequestIdEnv } from "./request-id.js";
import { listenHttp, type HttpListener } from "./listen.js";
import { readJsonBody } from "./body.js";
import { createLogger } from "../log.js";

const LIMIT = 1024;
const app = new Hono<RequestIdEnv>();
app.onError(onError(createLogger("test", "silent")));
let calls = 0;
app.post("/echo", async (c) => {
  calls++;
  return c.json({ got: await readJsonBody(c, LIMIT) });
});

let server: HttpListener;

describe("nesting", () => {
  it("refuses JSON nested deeper than 64 levels with a 400 invalid_json naming body; 64 levels pass", async () => {
    const nested = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
    const res = await app.request("/echo", { method: "POST", headers: { "content-type": "application/json" }, body: nested(65) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: "invalid_json", message: "body: nested deeper than 64 levels", param: "body" });
    expect((await app.request("/echo", { method: "POST", headers: { "content-type": "application/json" }, body: nested(64) })).status).toBe(200);
  });
});
beforeAll(async () => {
  server = await listenHttp(app.fetch, { host: "127.0.0.1", port: 0 });
});
afterAll(() => server?.close());

/** POSTs `parts` as separate writes, chunked unless `length` is given; resolves status and body. */
function post(parts: (string | Buffer)[], length?: number): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: server.address.port,
        path: "/echo",
        method: "POST",
        headers: { "content-type": "application/json", ...(length !== undefined ? { "content-length": length } : {}) },
      },
      (res) => {
        let text = "";
        res
          .setEncoding("utf8")
          .on("data", (d: string) => {
            text += d;
          })
          .on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) as Record<string, unknown> }));
      },
    );
    req.on("error", reject);
    // Parts in separate turns of the event loop, so the server sees them arrive one by one.
    const write = (i: number): void => {
      if (i === parts.length) {
        req.end();
        return;
      }
      req.write(parts[i]);
      setTimeout(() => write(i + 1), 5);
    };
    write(0);
  });
}

describe("readJsonBody on Node's IncomingMessage", () => {
  it("reads a body sent in one piece and one sent in several (chunked, or with a Content-Length), UTF-8 split across pieces", async () => {
    const whole = JSON.stringify({ a: "héllo" });
    // in one piece it is already buffered when the handler reads it (read at once, without waiting for its events)
    expect(await post([whole], Buffer.byteLength(whole))).toEqual({ status: 200, body: { got: { a: "héllo" } } });
    const bytes = Buffer.from(whole);
    const cut = bytes.indexOf(0xc3) + 1; // inside the two bytes of "é"
    for (const length of [undefined, bytes.length]) {
      const res = await post([bytes.subarray(0, cut), bytes.subarray(cut)], length);
      expect(res).toEqual({ status: 200, body: { got: { a: "héllo" } } });
    }
  });

  it("a declared Content-Length over the limit → 413 from the handler, refused on the header alone", async () => {
    const body = JSON.stringify({ a: "x".repeat(LIMIT) });
    const before = calls;
    const res = await post([body], Buffer.byteLength(body));
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "request_too_large", message: expect.stringMatching(/^body:/) });
    expect(calls).toBe(before + 1);
  });

  it("a chunked body that passes the limit → 413, and the server keeps serving", async () => {
    const res = await post(['{"a":"', "x".repeat(600), "x".repeat(600), '"}']);
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: "request_too_large" });
    expect((await post(['{"b":', "1}"])).body).toEqual({ got: { b: 1 } });
  });

  it("empty and malformed bodies → 400 invalid_json naming body", async () => {
    for (const [parts, length] of [
      [[], undefined],
      [[], 0],
      [['{"a":'], undefined],
      [['{"a":'], 5],
    ] as const) {
      const res = await post([...parts], length);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_json", message: expect.stringMatching(/^body:/) });
    }
  });
});

describe("readJsonBody without Node (app.request: a web stream body)", () => {
  it("reads it, and refuses one over the limit with 413", async () => {
    const before = calls;
    const ok = await app.request("/echo", { method: "POST", body: JSON.stringify({ a: 1 }) });
    expect(await ok.json()).toEqual({ got: { a: 1 } });
    const big = await app.request("/echo", {
      method: "POST",
      body: new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array(LIMIT + 1).fill(32));
          c.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(big.status).toBe(413);
    expect(calls).toBe(before + 2);
  });
});

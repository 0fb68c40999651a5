/** sseResponse: server-sent events written to Node's response under @hono/node-server, through a web stream elsewhere. */
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { request, type IncomingMessage } from "node:http";
import { MAX_LAG_BYTES, sseResponse, type SsePump } from "./event-stream.js";
import { until } from "../../scripts/lib/run.js";
import { setResponseHeader } from "./headers.js";
import { listenHttp, type HttpListener } from "./listen.js";

const event = (n: number) => `data: ${n}\n\n`;
const tick = () => new Promise((r) => setTimeout(r, 5));
/** A pump that sends two events a few milliseconds apart. */
const twoEvents = async (send: (text: string) => void): Promise<void> => {
  send(event(0));
  await tick();
  send(event(1));
};

let server: HttpListener | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function listen(app: Hono): Promise<string> {
  server = await listenHttp(app.fetch, { host: "127.0.0.1", port: 0 });
  return `http://127.0.0.1:${server.address.port}`;
}

/** An app whose one route answers with `pump`'s events, `cancel` told when the client goes. */
const sseApp = (pump: SsePump, cancel: () => void = () => undefined): Hono => new Hono().get("/", (c) => sseResponse(c, pump, cancel));

/** A request to `base` whose answer the client does not read yet (its socket paused). */
async function pausedClient(base: string): Promise<IncomingMessage> {
  const res = await new Promise<IncomingMessage>((resolve) => request(base, resolve).end());
  res.pause();
  return res;
}

describe("sseResponse under Node", () => {
  it("sends the headers set before it with the head, then each event as the pump sends it", async () => {
    const app = new Hono().get("/", (c) => {
      setResponseHeader(c, "x-before", "1");
      return sseResponse(
        c,
        async (send) => {
          for (let n = 0; n < 3; n++) {
            send(event(n));
            await tick();
          }
        },
        () => undefined,
      );
    });
    const res = await fetch(await listen(app));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("x-before")).toBe("1");
    expect(await res.text()).toBe(event(0) + event(1) + event(2));
  });

  it("tells a pump that the client lags, and drained() waits until the client has read what waited", async () => {
    const piece = `data: ${"x".repeat(64 * 1024)}\n\n`;
    const pieces = 1000; // 64 MB: more than the socket's buffers hold
    let sent = 0;
    let waiting = false;
    const app = sseApp(async (send, drained) => {
      for (; sent < pieces;) {
        sent++;
        if (!send(piece)) {
          waiting = true;
          await drained();
          waiting = false;
        }
      }
      send(event(1));
    });
    const base = await listen(app);
    const res = await pausedClient(base); // the client reads nothing for a while
    await new Promise((r) => setTimeout(r, 200));
    const stuck = sent;
    await new Promise((r) => setTimeout(r, 100));
    expect([waiting, sent]).toEqual([true, stuck]); // the pump waits in drained(), not sending
    expect(stuck).toBeLessThan(pieces);
    let bytes = 0;
    let tail = "";
    res.setEncoding("utf8").on("data", (d: string) => {
      bytes += d.length;
      tail = (tail + d).slice(-20);
    });
    res.resume();
    await new Promise((r) => res.on("end", r));
    expect(bytes).toBe(pieces * piece.length + event(1).length); // everything, once read
    expect(tail.endsWith(event(1))).toBe(true);
  });

  it("ends drained()'s wait when the client goes away: a pump waiting for a lagging reader is not left waiting for ever", async () => {
    const piece = `data: ${"x".repeat(64 * 1024)}\n\n`;
    let waiting = false;
    let waited = false;
    const app = sseApp(async (send, drained) => {
      while (send(piece));
      waiting = true;
      await drained();
      waited = true;
    });
    const res = await pausedClient(await listen(app));
    await until(() => waiting, 5000, "the pump to wait");
    // the socket's buffers take 64 KiB and more: the pump waits until the client reads, which it never will
    res.socket.destroy();
    await until(() => waited, 5000, "drained() to end with the client gone");
  });

  it("drops a client more than MAX_LAG_BYTES behind, as one that went away: cancel is called, the rest is not held", async () => {
    const piece = `data: ${"x".repeat(64 * 1024)}\n\n`;
    const pieces = 1024; // 64 MB that a client never reads
    let cancels = 0;
    let sentBeforeCancel = -1;
    const app = sseApp(
      async (send) => {
        for (let n = 0; n < pieces; n++) {
          send(piece);
          if (cancels > 0 && sentBeforeCancel < 0) sentBeforeCancel = n + 1;
          if (n % 64 === 0) await tick(); // the socket takes what it can meanwhile
        }
      },
      () => cancels++,
    );
    const base = await listen(app);
    const res = await pausedClient(base); // reads nothing for now
    await until(() => cancels > 0, 10_000, "the lagging client dropped");
    expect(cancels).toBe(1);
    expect(sentBeforeCancel * piece.length).toBeGreaterThan(MAX_LAG_BYTES);
    // its connection was closed: reading now, it gets what the sockets held, then the end, not the rest
    let bytes = 0;
    const closed = new Promise((r) => res.socket.on("close", r));
    res.on("data", (d: Buffer) => (bytes += d.length)).on("error", () => undefined);
    res.resume();
    await closed;
    expect(bytes).toBeLessThan(pieces * piece.length);
    expect(sentBeforeCancel).toBeLessThan(pieces);
  });

  it("sends one event larger than MAX_LAG_BYTES whole to a client that reads: the event in hand is not its lag", async () => {
    const big = `data: ${"y".repeat(MAX_LAG_BYTES + 1024 * 1024)}\n\n`;
    let cancels = 0;
    const app = sseApp(
      async (send) => {
        send(big);
        await tick();
        send(event(1));
      },
      () => cancels++,
    );
    const text = await (await fetch(await listen(app))).text();
    expect(cancels).toBe(0);
    expect(text.length).toBe(big.length + event(1).length);
  });

  it("drops a header set once the stream has begun, and the stream goes on to its end", async () => {
    const app = new Hono();
    app.use("*", async (c, next) => {
      await next();
      setResponseHeader(c, "x-after", "1"); // the head is written: nothing can carry it now
    });
    app.get("/", (c) => sseResponse(c, twoEvents, () => undefined));
    const res = await fetch(await listen(app));
    expect(res.headers.get("x-after")).toBeNull();
    expect(await res.text()).toBe(event(0) + event(1));
  });

  it("calls cancel once when the client goes away mid-stream, however the pump goes on", async () => {
    let cancels = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const app = sseApp(
      async (send) => {
        send(event(0));
        await held;
        send(event(1));
      },
      () => cancels++,
    );
    const client = new AbortController();
    const res = await fetch(await listen(app), { signal: client.signal });
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe(event(0));
    client.abort();
    for (let i = 0; i < 200 && cancels === 0; i++) await tick();
    release();
    await tick();
    expect(cancels).toBe(1);
  });
});

describe("sseResponse through a web stream (app.request)", () => {
  it("answers the pump's events, then ends", async () => {
    const app = sseApp(twoEvents);
    const res = await app.request("/");
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(await res.text()).toBe(event(0) + event(1));
  });

  it("calls cancel at once for a client gone before the answer began, and sends nothing", async () => {
    let cancels = 0;
    const app = sseApp(
      async (send) => {
        send(event(0));
      },
      () => cancels++,
    );
    const res = await app.request("/", { signal: AbortSignal.abort() });
    expect(cancels).toBe(1);
    expect(await res.text()).toBe("");
  });

  it("calls cancel when the pump rejects, and ends the answer with what it sent", async () => {
    let cancels = 0;
    const app = sseApp(
      async (send) => {
        send(event(0));
        await tick();
        throw new Error("a fault of the pump");
      },
      () => cancels++,
    );
    const res = await app.request("/");
    expect(await res.text()).toBe(event(0));
    expect(cancels).toBe(1);
  });
});

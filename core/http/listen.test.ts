/** listenHttp's request timeout: Node's 300 s default cuts off a 1 GB upload from a slow client. */
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { listenHttp } from "./listen.js";

describe("listenHttp", () => {
  it("keeps Node's request timeout unless told, and sets the one it is given", async () => {
    const plain = await listenHttp(() => new Response("ok"), { host: "127.0.0.1", port: 0 });
    const patient = await listenHttp(() => new Response("ok"), { host: "127.0.0.1", port: 0 }, { requestTimeoutMs: 1_324_000 });
    try {
      expect(plain.server.requestTimeout).toBe(300_000);
      expect(patient.server.requestTimeout).toBe(1_324_000);
      expect(await (await fetch(`http://127.0.0.1:${patient.address.port}/`)).text()).toBe("ok");
    } finally {
      await plain.close();
      await patient.close();
    }
  });

  it("closes a connection that sends nothing for the idle timeout (a stalled upload)", async () => {
    // The handler reads the body, as an upload does; the client sends part of it and stops.
    const server = await listenHttp(async (req) => new Response(String((await req.arrayBuffer()).byteLength)), { host: "127.0.0.1", port: 0 }, { idleTimeoutMs: 200 });
    try {
      const socket = connect(server.address.port, "127.0.0.1");
      await new Promise((r) => socket.once("connect", r));
      socket.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npart"); // then nothing more
      const closedAfter = await new Promise<number>((resolve) => {
        const t0 = Date.now();
        socket.once("close", () => resolve(Date.now() - t0));
      });
      expect(closedAfter).toBeGreaterThanOrEqual(150);
    } finally {
      await server.close();
    }
  });

  it("closes a connection that opens and sends nothing, and one that stops in its headers", async () => {
    const server = await listenHttp(() => new Response("ok"), { host: "127.0.0.1", port: 0 }, { idleTimeoutMs: 200 });
    try {
      for (const first of ["", "GET / HTTP/1.1\r\nHost: x\r\n"]) {
        const socket = connect(server.address.port, "127.0.0.1");
        await new Promise((r) => socket.once("connect", r));
        const t0 = Date.now();
        if (first) socket.write(first);
        await new Promise((r) => socket.once("close", r));
        expect(Date.now() - t0, JSON.stringify(first)).toBeGreaterThanOrEqual(150);
        expect(Date.now() - t0, JSON.stringify(first)).toBeLessThan(2000);
      }
    } finally {
      await server.close();
    }
  });

  it("never cuts an answer the server is making: a long wait for it, and a stream quiet for longer than the idle timeout", async () => {
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const server = await listenHttp(
      async (req) => {
        if (new URL(req.url).pathname === "/slow") {
          await sleep(700); // a completion queued, then generated, with nothing sent meanwhile
          return new Response("made");
        }
        const encoder = new TextEncoder();
        return new Response(
          new ReadableStream({
            async start(c) {
              for (const piece of ["a", "b", "c"]) {
                c.enqueue(encoder.encode(piece));
                await sleep(500);
              }
              c.close();
            },
          }),
        );
      },
      { host: "127.0.0.1", port: 0 },
      { idleTimeoutMs: 200 },
    );
    try {
      const base = `http://127.0.0.1:${server.address.port}`;
      expect(await (await fetch(`${base}/slow`)).text()).toBe("made");
      expect(await (await fetch(`${base}/stream`)).text()).toBe("abc");
    } finally {
      await server.close();
    }
  });

  it("keeps a slow upload that keeps moving, and closes a connection whose client stops reading the answer", async () => {
    const big = Buffer.alloc(64 * 1024 ** 2, 97);
    const server = await listenHttp(
      async (req) => {
        if (new URL(req.url).pathname !== "/big") return new Response(String((await req.arrayBuffer()).byteLength));
        let sent = 0; // streamed a megabyte at a time: the answer is not ended while the client holds it up
        return new Response(
          new ReadableStream({
            pull(c) {
              if (sent >= big.length) return c.close();
              c.enqueue(big.subarray(sent, (sent += 1024 ** 2)));
            },
          }),
        );
      },
      { host: "127.0.0.1", port: 0 },
      { idleTimeoutMs: 200 },
    );
    try {
      // 10 pieces 100 ms apart: a second in all, never 200 ms quiet
      const moving = connect(server.address.port, "127.0.0.1");
      let answer = "";
      moving.setEncoding("utf8").on("data", (d: string) => (answer += d));
      await new Promise((r) => moving.once("connect", r));
      moving.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nConnection: close\r\n\r\n");
      for (let i = 0; i < 10; i++) {
        await new Promise((r) => setTimeout(r, 100));
        moving.write("x");
      }
      await new Promise((r) => moving.once("close", r));
      expect(answer).toMatch(/^HTTP\/1\.1 200[^]*\r\n\r\n10$/);
      // a client that never reads a 64 MB answer: what waits to be sent is the client's to take
      const stuck = connect(server.address.port, "127.0.0.1");
      await new Promise((r) => stuck.once("connect", r));
      stuck.pause();
      stuck.write("GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
      await new Promise((r) => setTimeout(r, 1000));
      // reading again, it gets what was on the way before the server gave up, then the end
      let got = 0;
      stuck.on("data", (d: Buffer) => (got += d.length)).on("error", () => undefined);
      const closed = new Promise((r) => stuck.once("close", r));
      stuck.resume();
      await closed;
      expect(got).toBeLessThan(big.length);
    } finally {
      await server.close();
    }
  });
});

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
});

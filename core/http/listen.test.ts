/** listenHttp's request timeout: Node's 300 s default cuts off a 1 GB upload from a slow client. */
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
});

/**
 * A draining link ends its stream only once the scheduler has read all it sent: the last
 * completion's `done` reaches a scheduler that reads slowly. The scheduler is a bare grpc-js
 * server in this process that stops reading while the agent drains; the engine is real (the
 * fabricated tiny model).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import type { AgentMessage__Output } from "../../proto/index.js";
import { bareScheduler, linkTo, type SchedulerCall } from "../../test/helpers/bare-scheduler.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { LlmEngine } from "../llm/index.js";

const logger = createLogger("test", "silent");

let engine: LlmEngine;
beforeAll(async () => {
  engine = await LlmEngine.load({ models: [{ id: "famB-v3.1", path: TINY_MODEL }], sequences: 1, contextSize: 2048, threads: 1, gpu: "cpu", logger });
});
afterAll(async () => {
  await engine?.dispose();
});

describe("FleetLink.drain", () => {
  it("ends the link only once the scheduler has read the running completion's done, however slowly it reads", { timeout: 30_000 }, async () => {
    const seen: AgentMessage__Output[] = [];
    let call!: SchedulerCall;
    let drainAsked!: () => void;
    const draining = new Promise<void>((r) => (drainAsked = r));
    const server = await bareScheduler((c) => {
      call = c;
      c.on("data", (m: AgentMessage__Output) => {
        seen.push(m);
        if (m.register) {
          c.write({ registered: { node_id: m.register.node_id, heartbeat_interval_ms: 60_000, accepts_chunks: true } });
          c.write({
            completion: { request_id: "long", trace_id: "t", model: "famB-v3.1", messages: [{ role: "user", content: "a long story" }], max_tokens: 1500, temperature: 0 },
          });
        }
        if (m.draining) {
          c.pause(); // a busy scheduler: it reads nothing more for a while
          drainAsked();
        }
        if (m.done || m.error) c.end();
      });
      c.on("end", () => c.end());
    });
    const link = linkTo(server.port, {
      engine,
      streamIntervalMs: 0, // a message per piece: many messages behind the paused reader
    });
    try {
      link.start();
      while (!seen.some((m) => m.chunk || m.chunks)) await new Promise((r) => setTimeout(r, 5));
      const drained = link.drain(20_000);
      await draining;
      await new Promise((r) => setTimeout(r, 1_500)); // longer than a drain waits for its own end to be written
      call.resume();
      await drained;
      expect(seen.find((m) => m.done)?.done).toMatchObject({ request_id: "long", finish_reason: "length" });
    } finally {
      await link.stop();
      server.close();
    }
  });
});

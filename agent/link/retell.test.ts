/**
 * A placeable agent's Register names the replicas it holds; what changes before the scheduler's
 * Registered comes back (a report sent meanwhile is not delivered: the link is not connected yet)
 * is told again then. The scheduler is a bare grpc-js server in this process; the replicas are
 * real (the fabricated tiny model, pulled from a hub on loopback, loaded into the engine).
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import { ModelHub } from "../../hub/index.js";
import { WhisperCatalog } from "../../models/whisper.js";
import type { AgentMessage__Output } from "../../proto/index.js";
import { bareScheduler, linkTo } from "../../test/helpers/bare-scheduler.js";
import { TINY_MODEL, tempDir } from "../../test/helpers/fleet.js";
import { startHub, type TestHub } from "../../test/helpers/hub.js";
import { LlmEngine } from "../llm/index.js";
import { Replicas, type ReplicaReport } from "../placement/index.js";

const MB = 1e6;
const logger = createLogger("test", "silent");

let hub: TestHub;
let engine: LlmEngine;
let models: ModelHub;
beforeAll(async () => {
  hub = await startHub();
  hub.put("acme/tiny-GGUF", "tiny.gguf", { body: readFileSync(TINY_MODEL) });
  engine = await LlmEngine.load({ models: [], sequences: 1, contextSize: 256, threads: 1, gpu: "cpu", logger });
  models = new ModelHub({ source: { url: hub.url }, whisperDir: tempDir(), modelsDir: tempDir(), catalog: WhisperCatalog.builtin, reserveBytes: 0 });
});
afterAll(async () => {
  models?.close();
  await engine?.dispose();
  await hub?.close();
});

describe("FleetLink's Register and the replicas", () => {
  it("tells again, once registered, the replicas that changed after its Register: a new one's state, an unloaded one's end", async () => {
    const reports: ReplicaReport[] = [];
    const replicas = new Replicas({ engine, hub: models, devices: [{ name: "cpu", totalBytes: 1000 * MB }], report: (r) => reports.push(r), logger });
    const ready = async (id: string) => {
      while (!reports.some((r) => r.modelId === id && r.phase === "ready")) await new Promise((res) => setTimeout(res, 10));
    };
    const order = (id: string) => replicas.load({ modelId: id, source: "hf:acme/tiny-GGUF/tiny.gguf", contextSize: 256, sequences: 1, split: [100 * MB] });
    order("kept");
    order("leaving");
    await Promise.all([ready("kept"), ready("leaving")]);

    // The scheduler holds its Registered until the replicas have changed: "leaving" unloaded, "arriving" loaded.
    const seen: AgentMessage__Output[] = [];
    let registerSeen!: () => void;
    const registered = new Promise<void>((r) => (registerSeen = r));
    let reply!: () => void;
    const server = await bareScheduler((call) => {
      call.on("data", (m: AgentMessage__Output) => {
        seen.push(m);
        if (m.register) {
          const nodeId = m.register.node_id;
          reply = () => call.write({ registered: { node_id: nodeId, heartbeat_interval_ms: 60_000, accepts_chunks: true } });
          registerSeen();
        }
      });
    });
    const link = linkTo(server.port, {
      engine,
      replicas,
    });
    try {
      link.start();
      await registered;
      const register = seen.find((m) => m.register)!.register!;
      expect(register.replicas.map((r) => [r.model_id, r.state]).sort()).toEqual([
        ["kept", "READY"],
        ["leaving", "READY"],
      ]);
      await replicas.unload("leaving");
      order("arriving");
      await ready("arriving");
      const before = seen.length;
      reply();
      // what the link tells once registered (a heartbeat's worth of waiting: it is sent at once)
      for (let i = 0; i < 100 && seen.filter((m) => m.model_state).length < 2; i++) await new Promise((res) => setTimeout(res, 10));
      const told = seen.slice(before).flatMap((m) => (m.model_state ? [[m.model_state.model_id, m.model_state.state]] : []));
      expect(told.sort()).toEqual([
        ["arriving", "READY"],
        ["leaving", "UNLOADED"],
      ]);
    } finally {
      await link.stop();
      server.close();
      await replicas.unload("kept");
      await replicas.unload("arriving");
    }
  });
});

/**
 * The operator's actions on the Fleet (the dashboard's fleet page), driven through its agent-side
 * interface with recording links: where a pin lives and when it goes, and what a drain sends and
 * changes for placement. (test/fleet-admin.test.ts runs the same actions through the admin API on
 * real agents.)
 */
import { describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import type { ModelState__Output, Register__Output } from "../../proto/index.js";
import type { PlacedModel } from "../placement/index.js";
import { RecordingLink } from "../../test/helpers/recording-link.js";
import { Fleet } from "./fleet.js";

const MB = 1_000_000;
const model = (id: string): PlacedModel => ({ id, source: `/m/${id}.gguf`, contextSize: 512, sequences: 2, minReplicas: 0, maxReplicas: 1, idleUnloadS: 0, memoryBytes: 40 * MB });
const CATALOG = new Map(["m-a", "m-b"].map((id) => [id, model(id)]));

const fleet = () =>
  new Fleet({
    queueSize: 8,
    queueTimeoutMs: 5000,
    heartbeatMs: 60_000,
    logger: createLogger("test", "silent"),
    placement: { model: (id) => CATALOG.get(id), models: () => CATALOG.values(), size: (m) => Promise.resolve(m.memoryBytes!) },
  });

const ready = (id: string): ModelState__Output => ({
  model_id: id,
  state: "READY",
  progress: 1,
  reason: "",
  device_bytes: [40 * MB],
  pool: { model_ids: [id], slots: 2, context_size: 512, fingerprint: "fp", capabilities: [] },
});
const state = (id: string, s: "FAILED" | "UNLOADED"): ModelState__Output => ({
  model_id: id,
  state: s,
  progress: 0,
  reason: s === "FAILED" ? "no file" : "",
  device_bytes: [],
  pool: null,
});

/** A placeable node offering one 100 MB device, holding `replicas` already. */
const register = (nodeId: string, replicas: ModelState__Output[] = []): Register__Output => ({
  node_id: nodeId,
  agent_version: "test",
  hardware: null,
  transcription: null,
  placeable: true,
  devices: [{ name: "gpu", total_bytes: 100 * MB, free_bytes: 100 * MB }],
  replicas,
  pools: [],
});

const loads = (link: RecordingLink) => link.sent.filter((m) => m.load_model).map((m) => m.load_model!.model_id);

describe("the operator's pins", () => {
  it("go with their replica: kept across a reconnect that still holds it, dropped by one that does not, by an unload and by a failed load", async () => {
    const f = fleet();
    const first = new RecordingLink();
    f.attach(register("n1"), first);
    expect(await f.pin("n1", "m-a")).toEqual({ state: "loading", loaded: true, evicted: [] });
    expect(loads(first)).toEqual(["m-a"]);
    f.receive("n1", first, { body: "model_state", model_state: ready("m-a") });
    expect(f.snapshot()[0]!.replicas).toMatchObject([{ model: "m-a", state: "ready", slots: 2, pinned: true }]);

    // the node's stream breaks and it comes back holding the replica: still pinned
    f.detach("n1", first, "test");
    expect(f.pinned("n1", "m-a")).toBe(true);
    const second = new RecordingLink();
    f.attach(register("n1", [ready("m-a")]), second);
    expect(f.snapshot()[0]!.replicas).toMatchObject([{ model: "m-a", pinned: true }]);

    // back without it (restarted): the pin is gone
    f.detach("n1", second, "test");
    const third = new RecordingLink();
    f.attach(register("n1"), third);
    expect(f.pinned("n1", "m-a")).toBe(false);

    // a load that fails takes its pin with it, and so does an unload the node reports
    await f.pin("n1", "m-a");
    f.receive("n1", third, { body: "model_state", model_state: state("m-a", "FAILED") });
    expect(f.pinned("n1", "m-a")).toBe(false);
    await f.pin("n1", "m-b");
    f.receive("n1", third, { body: "model_state", model_state: ready("m-b") });
    expect(f.pinned("n1", "m-b")).toBe(true);
    f.receive("n1", third, { body: "model_state", model_state: state("m-b", "UNLOADED") });
    expect(f.pinned("n1", "m-b")).toBe(false);
    expect(f.snapshot()[0]!.replicas).toEqual([]);
    f.close();
  });

  it("are refused on a node that serves its --serve list, and a pin's refusal orders nothing", async () => {
    const f = fleet();
    const link = new RecordingLink();
    f.attach({ ...register("serve-node"), placeable: false, devices: [] }, link);
    await expect(f.pin("serve-node", "m-a")).rejects.toMatchObject({
      status: 409,
      code: "placement_refused",
      message: 'node: "serve-node" serves its --serve list and takes no placed replicas',
    });
    await expect(f.pin("nowhere", "m-a")).rejects.toMatchObject({ status: 404, code: "node_not_found" });
    await expect(f.pin("serve-node", "m-z")).rejects.toMatchObject({ status: 400, code: "model_not_found" });
    expect(link.sent).toEqual([]);
    expect(f.snapshot()[0]).toMatchObject({ placeable: false, devices: [], replicas: [] });
    f.close();
  });
});

describe("an operator's drain", () => {
  it("sends Drain once, gives the node no work, and its replicas count no more: a request for its model has one placed on another node", async () => {
    const f = fleet();
    const one = new RecordingLink();
    const two = new RecordingLink();
    f.attach(register("n1", [ready("m-a")]), one);
    f.attach(register("n2"), two);
    expect(f.drainNode("n1", 5000)).toBe(true);
    expect(f.drainNode("n1", 5000)).toBe(false);
    expect(one.sent.filter((m) => m.drain)).toEqual([{ drain: { deadline_ms: 5000 } }]);
    expect(f.snapshot().find((a) => a.nodeId === "n1")).toMatchObject({ draining: true });
    expect(() => f.drainNode("n9", 5000)).toThrow(/^node: no node "n9" is connected to this scheduler$/);

    void f.submit({ model: "m-a", messages: [{ role: "user", content: "hi" }] });
    await new Promise((r) => setTimeout(r, 10)); // the placer sizes the model first
    expect(one.requests()).toEqual([]);
    expect(loads(two)).toEqual(["m-a"]);
    f.close();
  });
});

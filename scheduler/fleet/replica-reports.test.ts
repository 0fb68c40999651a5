/**
 * What a placeable node reports of its replicas, taken only within bounds: reports of models it was
 * never given, or may not offer, change nothing; a refused READY is answered once, and takes the
 * replica's pool out of routing; a READY told again keeps the pool's count of requests; a load that stands still is given up. (The node's token is
 * the recording link's `offers` and `maxSlots`.)
 */
import { describe, expect, it, vi } from "vitest";
import { createLogger } from "../../core/log.js";
import type { ModelState__Output, Register__Output } from "../../proto/index.js";
import type { PlacedModel } from "../placement/index.js";
import { RecordingLink } from "../../test/helpers/recording-link.js";
import { Fleet } from "./fleet.js";

const MB = 1_000_000;
const model = (id: string): PlacedModel => ({ id, source: `/m/${id}.gguf`, contextSize: 512, sequences: 2, minReplicas: 0, maxReplicas: 1, idleUnloadS: 0, memoryBytes: 40 * MB });
const CATALOG = new Map(["m-a", "m-b", "m-secret"].map((id) => [id, model(id)]));

const fleet = (heartbeatMs = 60_000) =>
  new Fleet({
    queueSize: 8,
    queueTimeoutMs: 60 * 60_000,
    heartbeatMs,
    logger: createLogger("test", "silent"),
    placement: { model: (id) => CATALOG.get(id), models: () => CATALOG.values(), size: (m) => Promise.resolve(m.memoryBytes!) },
  });

const report = (id: string, s: ModelState__Output["state"], pool: Partial<NonNullable<ModelState__Output["pool"]>> = {}): ModelState__Output => ({
  model_id: id,
  state: s,
  progress: s === "LOADING" ? 0.1 : 1,
  reason: s === "FAILED" ? "no file" : "",
  device_bytes: [40 * MB],
  pool: s === "READY" ? { model_ids: [id], slots: 2, context_size: 512, fingerprint: "fp", capabilities: [], ...pool } : null,
});

const register = (nodeId: string): Register__Output => ({
  node_id: nodeId,
  agent_version: "test",
  hardware: null,
  transcription: null,
  placeable: true,
  devices: [{ name: "gpu", total_bytes: 100 * MB, free_bytes: 100 * MB }],
  replicas: [],
  pools: [],
});

/** A link whose node token offers every model but `m-secret`, and 8 slots. */
function tokenLink(): RecordingLink {
  const link = new RecordingLink();
  Object.assign(link, { offers: (m: string) => m !== "m-secret", maxSlots: 8 });
  return link;
}

const unloads = (link: RecordingLink) => link.sent.filter((m) => m.unload_model).map((m) => m.unload_model!.model_id);

describe("a placeable node's replica reports", () => {
  it("change nothing for a model outside the catalog, one its token may not offer, or a FAILED/UNLOADED of a replica never known", () => {
    const f = fleet();
    const link = tokenLink();
    f.attach(register("n1"), link);
    for (const m of ["not-in-catalog", "m-secret"]) for (const s of ["LOADING", "READY"] as const) f.receive("n1", link, { body: "model_state", model_state: report(m, s) });
    for (let i = 0; i < 100; i++) f.receive("n1", link, { body: "model_state", model_state: report(`m-a`, i % 2 ? "FAILED" : "UNLOADED") });
    expect(f.snapshot()[0]!.replicas).toEqual([]);
    expect(f.serves("m-secret")).toBe(false);
    expect(f.statusOf("m-a")).not.toBe("loading");
    expect(link.sent.filter((m) => m.unload_model)).toEqual([]);
  });

  it("answer a refused READY (slots other than the catalog's) with one unload however often it is repeated", () => {
    const f = fleet();
    const link = tokenLink();
    f.attach(register("n1"), link);
    for (let i = 0; i < 50; i++) f.receive("n1", link, { body: "model_state", model_state: report("m-a", "READY", { slots: 7 }) });
    expect(unloads(link)).toEqual(["m-a"]);
    expect(f.serves("m-a")).toBe(false);
  });

  it("answer a READY told again with a pool now refused by unloading the replica: its pool takes no new request", () => {
    const f = fleet();
    const link = tokenLink();
    f.attach(register("n1"), link);
    f.receive("n1", link, { body: "model_state", model_state: report("m-a", "READY") });
    expect(f.serves("m-a")).toBe(true);
    f.receive("n1", link, { body: "model_state", model_state: report("m-a", "READY", { slots: 7 }) });
    expect(unloads(link)).toEqual(["m-a"]);
    expect(f.serves("m-a")).toBe(false);
    f.close();
  });

  it("keep the pool, and the requests it counts, when READY is told again", async () => {
    const f = fleet();
    const link = tokenLink();
    f.attach(register("n1"), link);
    f.receive("n1", link, { body: "model_state", model_state: report("m-a", "READY") });
    const one = f.submit({ model: "m-a", messages: [{ role: "user", content: "hi" }] });
    const two = f.submit({ model: "m-a", messages: [{ role: "user", content: "hi" }] });
    void one[Symbol.asyncIterator]()
      .next()
      .catch(() => undefined);
    void two[Symbol.asyncIterator]()
      .next()
      .catch(() => undefined);
    expect(link.sent.filter((m) => m.completion)).toHaveLength(2);
    f.receive("n1", link, { body: "model_state", model_state: report("m-a", "READY") });
    // both slots still taken: a third request waits rather than going to a full pool
    const three = f.submit({ model: "m-a", messages: [{ role: "user", content: "hi" }] });
    void three[Symbol.asyncIterator]()
      .next()
      .catch(() => undefined);
    expect(link.sent.filter((m) => m.completion)).toHaveLength(2);
    f.close();
  });

  it("give up a load that reports no progress for ten minutes: unloaded, and its model placed elsewhere", async () => {
    vi.useFakeTimers();
    try {
      const f = fleet(4 * 60_000); // the sweeper looks every 4 minutes; a node is dropped only after 12 silent ones
      const stuck = tokenLink();
      const other = tokenLink();
      f.attach(register("n1"), stuck);
      f.attach(register("n2"), other);
      const waiting = f.submit({ model: "m-b", messages: [{ role: "user", content: "hi" }] });
      void waiting[Symbol.asyncIterator]()
        .next()
        .catch(() => undefined);
      await vi.advanceTimersByTimeAsync(10);
      const first = [stuck, other].find((l) => l.sent.some((m) => m.load_model))!;
      const second = first === stuck ? other : stuck;
      const firstNode = first === stuck ? "n1" : "n2";
      f.receive(firstNode, first, { body: "model_state", model_state: report("m-b", "LOADING") });
      await vi.advanceTimersByTimeAsync(9 * 60_000);
      expect(unloads(first)).toEqual([]);
      await vi.advanceTimersByTimeAsync(3.5 * 60_000);
      expect(unloads(first)).toEqual(["m-b"]);
      expect(second.sent.filter((m) => m.load_model).map((m) => m.load_model!.model_id)).toEqual(["m-b"]);
      f.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it("keep a load queued behind another's download while the node reports progress: its loads run one at a time", async () => {
    vi.useFakeTimers();
    try {
      const f = fleet(4 * 60_000);
      const node = tokenLink();
      f.attach(register("n1"), node);
      for (const m of ["m-a", "m-b"])
        void f
          .submit({ model: m, messages: [{ role: "user", content: "hi" }] })
          [Symbol.asyncIterator]()
          .next()
          .catch(() => undefined);
      await vi.advanceTimersByTimeAsync(10);
      expect(node.sent.filter((m) => m.load_model).map((m) => m.load_model!.model_id)).toEqual(["m-a", "m-b"]);
      f.receive("n1", node, { body: "model_state", model_state: { ...report("m-a", "LOADING"), progress: 0.1 } });
      f.receive("n1", node, { body: "model_state", model_state: { ...report("m-b", "LOADING"), progress: 0 } }); // waits for m-a's turn
      // m-a's download goes on for 13 minutes; m-b reports nothing until its turn
      for (const progress of [0.3, 0.5, 0.7]) {
        await vi.advanceTimersByTimeAsync(4.5 * 60_000);
        f.receive("n1", node, { body: "model_state", model_state: { ...report("m-a", "LOADING"), progress } });
      }
      await vi.advanceTimersByTimeAsync(60_000);
      expect(unloads(node)).toEqual([]);
      f.close();
    } finally {
      vi.useRealTimers();
    }
  });
});

import { describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import type { PlacementNode, PlacementReplica } from "./plan.js";
import { Placer, type LoadOrder, type PlacedModel, type PlacementView } from "./placer.js";

const GB = 1e9;
const model = (id: string, more: Partial<PlacedModel> = {}): PlacedModel => ({
  id,
  source: `/models/${id}.gguf`,
  contextSize: 4096,
  sequences: 4,
  minReplicas: 0,
  maxReplicas: 1,
  idleUnloadS: 0,
  ...more,
});

/** A registry of nodes in memory: orders are recorded and take effect at once (a load counts as loading). */
class Registry implements PlacementView {
  readonly orders: string[] = [];
  constructor(readonly map: Map<string, { devices: number[]; replicas: PlacementReplica[] }>) {}
  *nodes(): Iterable<PlacementNode> {
    for (const [id, n] of this.map) {
      const used = n.devices.map((_, i) => n.replicas.reduce((a, r) => a + (r.bytes[i] ?? 0), 0));
      yield { id, placeable: true, devices: n.devices.map((total, i) => ({ totalBytes: total, freeBytes: total - used[i]! })), replicas: n.replicas };
    }
  }
  load(node: string, order: LoadOrder): void {
    this.orders.push(`load ${order.model.id} on ${node}`);
    this.map.get(node)!.replicas.push({ model: order.model.id, bytes: order.split, state: "loading", inflight: 0, lastUsedAt: 0 });
  }
  unload(node: string, id: string): void {
    this.orders.push(`unload ${id} on ${node}`);
    const n = this.map.get(node)!;
    n.replicas = n.replicas.filter((r) => r.model !== id);
  }
}

function placer(registry: Registry, sizes: Record<string, number>, catalog: PlacedModel[], claims?: (id: string) => boolean) {
  return new Placer({
    view: registry,
    model: (id) => catalog.find((m) => m.id === id),
    models: () => catalog,
    size: async (m) => sizes[m.id]!,
    ...(claims ? { claims: { claim: async (id) => claims(id) } } : {}),
    logger: createLogger("test", "silent"),
  });
}

describe("Placer", () => {
  it("passes over a node a load failed on for avoidMs only: then it is placed on again", async () => {
    let now = 1_000_000;
    const registry = new Registry(new Map([["a", { devices: [24 * GB], replicas: [] }]]));
    const catalog = [model("m"), model("n")];
    const p = new Placer({
      view: registry,
      model: (id) => catalog.find((m) => m.id === id),
      models: () => catalog,
      size: async () => 10 * GB,
      avoidMs: 60_000,
      now: () => now,
      logger: createLogger("test", "silent"),
    });
    p.failed("a", "m", "out of memory");
    await p.ensure("m");
    expect(registry.orders).toEqual([]); // the only node is passed over: the request waits
    now += 59_000;
    p.failed("a", "n", "out of memory"); // a later failure, of another model, forgets none that still holds
    await p.ensure("m");
    expect(registry.orders).toEqual([]);
    now += 1_001;
    await p.ensure("m");
    expect(registry.orders).toEqual(["load m on a"]);
    await p.ensure("n"); // n's failure still holds
    expect(registry.orders).toEqual(["load m on a"]);
  });

  it("orders one load for a cold model, and none while that one loads", async () => {
    const registry = new Registry(
      new Map([
        ["a", { devices: [24 * GB], replicas: [] }],
        ["b", { devices: [48 * GB], replicas: [] }],
      ]),
    );
    const p = placer(registry, { m: 10 * GB }, [model("m")]);
    await Promise.all([p.ensure("m"), p.ensure("m")]);
    await p.ensure("m");
    expect(registry.orders).toEqual(["load m on a"]);
    expect(p.replicas("m")).toBe(1);
  });

  it("unloads the idle replicas the plan names before the load, and refuses a model no node could hold with model_too_large", async () => {
    const registry = new Registry(new Map([["a", { devices: [24 * GB], replicas: [{ model: "old", bytes: [20 * GB], state: "ready", inflight: 0, lastUsedAt: 1 }] }]]));
    const p = placer(registry, { m: 10 * GB, huge: 100 * GB }, [model("m"), model("old"), model("huge")]);
    await p.ensure("m");
    expect(registry.orders).toEqual(["unload old on a", "load m on a"]);
    await expect(p.ensure("huge")).rejects.toMatchObject({
      status: 503,
      code: "model_too_large",
      message: 'model: "huge" needs 93.1 GiB of memory for its context and sequences; the largest node, a, has 22.4 GiB',
    });
    expect(await p.status("huge")).toBe("too_large");
    expect(await p.status("m")).toBe("placeable");
  });

  it("plans after its claim, with nothing awaited before the orders: two models decided at once never plan against the same free memory", async () => {
    const registry = new Registry(new Map([["a", { devices: [10 * GB], replicas: [] }]]));
    const p = new Placer({
      view: registry,
      model: (id) => model(id),
      models: () => [],
      size: async () => 6 * GB,
      claims: { claim: () => new Promise((r) => setTimeout(() => r(true), 20)) },
      logger: createLogger("test", "silent"),
    });
    await Promise.all([p.ensure("m1"), p.ensure("m2")]);
    expect(registry.orders).toEqual(["load m1 on a"]);
  });

  it("passes over a node a load failed on, adds replicas up to max_replicas, keeps min_replicas, and leaves the load to the scheduler holding the claim", async () => {
    const registry = new Registry(
      new Map([
        ["a", { devices: [24 * GB], replicas: [] }],
        ["b", { devices: [48 * GB], replicas: [] }],
      ]),
    );
    const p = placer(registry, { m: 10 * GB, kept: 10 * GB }, [model("m", { maxReplicas: 2 }), model("kept", { minReplicas: 2, maxReplicas: 2 })]);
    p.failed("a", "m", "out of memory");
    await p.ensure("m");
    expect(registry.orders).toEqual(["load m on b"]);
    await p.ensure("m", 5); // pressure: one more, up to max_replicas (2); a is still passed over for m
    expect(registry.orders).toEqual(["load m on b"]);
    await p.keepMinimums();
    expect(registry.orders.slice(1)).toEqual(["load kept on a", "load kept on b"]);
    const other = placer(registry, { x: GB }, [model("x")], () => false);
    await other.ensure("x");
    expect(registry.orders).toHaveLength(3);
  });
});

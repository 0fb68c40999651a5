import { describe, expect, it } from "vitest";
import { choosePlacement, UNLOAD_CANDIDATES, type PlacementNode, type PlacementReplica, type PlacementRules } from "./plan.js";

const GB = 1e9;

/** A node with devices of these sizes (GB), free unless replicas hold them. */
function node(id: string, gpus: number[], replicas: Partial<PlacementReplica>[] = [], placeable = true): PlacementNode {
  const reps = replicas.map((r) => ({ model: "x", bytes: [0], state: "ready" as const, inflight: 0, lastUsedAt: 0, ...r }));
  return {
    id,
    placeable,
    devices: gpus.map((g, i) => ({ totalBytes: g * GB, freeBytes: g * GB - reps.reduce((a, r) => a + (r.bytes[i] ?? 0), 0) })),
    replicas: reps,
  };
}

const rules = (counts: Record<string, number> = {}, mins: Record<string, number> = {}): PlacementRules => ({
  replicasOf: (m) => counts[m] ?? 1,
  minReplicasOf: (m) => mins[m] ?? 0,
});

describe("choosePlacement", () => {
  it("puts a model on the smallest single device that holds it, and on a node with free room before one that must unload", () => {
    const nodes = [node("a", [80]), node("b", [24, 48]), node("c", [24], [{ model: "old", bytes: [20 * GB] }])];
    expect(choosePlacement({ model: "m", bytes: 20 * GB }, nodes, rules())).toEqual({ kind: "place", node: "b", split: [20 * GB, 0], evict: [] });
    // only c's GPU is the right size, but it holds an idle model: b's 48 GB GPU wins as no replica is unloaded
    expect(choosePlacement({ model: "m", bytes: 40 * GB }, nodes, rules())).toEqual({ kind: "place", node: "b", split: [0, 40 * GB], evict: [] });
  });

  it("refuses at once a model no node could hold even empty, naming the largest node", () => {
    const nodes = [node("a", [80]), node("b", [24, 24]), node("off", [500], [], false)];
    expect(choosePlacement({ model: "huge", bytes: 200 * GB }, nodes, rules())).toEqual({ kind: "too_large", needBytes: 200 * GB, largest: { node: "a", bytes: 80 * GB } });
    // no node takes replicas now (a moment after a start, or every one draining): it waits, it is not too large
    expect(choosePlacement({ model: "huge", bytes: 1 }, [node("off", [500], [], false)], rules())).toEqual({ kind: "no_room", needBytes: 1 });
  });

  it("unloads the least recently used idle replicas of a full node, and only as many as it takes", () => {
    const full = node(
      "a",
      [24],
      [
        { model: "newest", bytes: [8 * GB], lastUsedAt: 300 },
        { model: "oldest", bytes: [8 * GB], lastUsedAt: 100 },
        { model: "middle", bytes: [8 * GB], lastUsedAt: 200 },
      ],
    );
    expect(choosePlacement({ model: "m", bytes: 8 * GB }, [full], rules())).toEqual({ kind: "place", node: "a", split: [8 * GB], evict: ["oldest"] });
    expect(choosePlacement({ model: "m", bytes: 16 * GB }, [full], rules())).toEqual({ kind: "place", node: "a", split: [16 * GB], evict: ["oldest", "middle"] });
  });

  it("never unloads a replica that answers a request, loads, is to be kept (pinned, or idle too briefly), or is its model's last above min_replicas: it waits (no_room)", () => {
    const held = node(
      "a",
      [24],
      [
        { model: "busy", bytes: [6 * GB], inflight: 1 },
        { model: "loading", bytes: [6 * GB], state: "loading" },
        { model: "pinned", bytes: [6 * GB], keep: true },
        { model: "kept", bytes: [6 * GB] },
      ],
    );
    expect(choosePlacement({ model: "m", bytes: 6 * GB }, [held], rules({ kept: 1 }, { kept: 1 }))).toEqual({ kind: "no_room", needBytes: 6 * GB });
    // with a second replica of "kept" elsewhere, this one may go
    expect(choosePlacement({ model: "m", bytes: 6 * GB }, [held], rules({ kept: 2 }, { kept: 1 }))).toMatchObject({ kind: "place", evict: ["kept"] });
  });

  it("spreads a model too large for any one GPU over a node's GPUs in proportion to their free memory (80 and 60 GB free: 4 to 3)", () => {
    const nodes = [node("two", [80, 80], [{ model: "small", bytes: [0, 20 * GB], inflight: 1 }]), node("one", [80])];
    const placed = choosePlacement({ model: "big", bytes: 120 * GB }, nodes, rules());
    expect(placed).toEqual({ kind: "place", node: "two", split: [68_571_428_572, 51_428_571_428], evict: [] });
    if (placed.kind === "place") expect(placed.split[0]! + placed.split[1]!).toBe(120 * GB);
  });

  it("passes over nodes that do not take replicas, nodes a load already failed on, and nodes that hold the model already", () => {
    const nodes = [node("served", [80], [], false), node("failed", [80]), node("ok", [40]), node("has", [40], [{ model: "m", bytes: [30 * GB] }])];
    expect(choosePlacement({ model: "m", bytes: 30 * GB }, nodes, { ...rules(), avoid: new Set(["failed"]) })).toMatchObject({ kind: "place", node: "ok" });
    expect(choosePlacement({ model: "m", bytes: 30 * GB }, nodes.slice(3), rules())).toEqual({ kind: "no_room", needBytes: 30 * GB });
    // a load failed on the only node that could hold it: it waits (no_room), it is not too large
    expect(choosePlacement({ model: "m", bytes: 50 * GB }, nodes.slice(0, 2), { ...rules(), avoid: new Set(["failed"]) })).toEqual({ kind: "no_room", needBytes: 50 * GB });
  });

  it("when every node of a large fleet must unload, compares those nearest to fitting, which include the cheapest", () => {
    const full = Array.from({ length: 3 * UNLOAD_CANDIDATES }, (_, i) => node(`n${String(i).padStart(3, "0")}`, [24], [{ model: `m${i}`, bytes: [24 * GB] }]));
    // the last node has 16 GB free: it unloads 8 GB where every other unloads 24
    full.push(node("zz", [24], [{ model: "small", bytes: [8 * GB] }]));
    full[full.length - 1] = { ...full[full.length - 1]!, devices: [{ totalBytes: 24 * GB, freeBytes: 16 * GB }] };
    expect(choosePlacement({ model: "m", bytes: 20 * GB }, full, rules())).toEqual({ kind: "place", node: "zz", split: [20 * GB], evict: ["small"] });
  });

  it("keeps a replica loaded whose unloading would free nothing on the device chosen", () => {
    const n = node(
      "a",
      [24, 24],
      [
        { model: "left", bytes: [20 * GB, 0], lastUsedAt: 1 },
        { model: "right", bytes: [0, 20 * GB], lastUsedAt: 2 },
      ],
    );
    // LRU tries "left" first; that frees GPU 0, so "right" stays
    expect(choosePlacement({ model: "m", bytes: 10 * GB }, [n], rules())).toEqual({ kind: "place", node: "a", split: [10 * GB, 0], evict: ["left"] });
    // unloading "small" (the oldest) leaves GPU 0 too small and a split short; "large" is unloaded from GPU 1, and "small" is kept
    const m = node(
      "b",
      [24, 30],
      [
        { model: "small", bytes: [20 * GB, 0], lastUsedAt: 1 },
        { model: "large", bytes: [0, 28 * GB], lastUsedAt: 2 },
      ],
    );
    expect(choosePlacement({ model: "m", bytes: 27 * GB }, [m], rules())).toEqual({ kind: "place", node: "b", split: [0, 27 * GB], evict: ["large"] });
  });
});

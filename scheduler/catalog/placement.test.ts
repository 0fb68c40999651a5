/** The catalog as placement reads it: a replica's size from its GGUF header, read once per source and shape, and again a minute after a failure. */
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { HubSource } from "../../hub/index.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { tempDir } from "../../test/helpers/temp.js";
import type { PlacedModel } from "../placement/index.js";
import { catalogPlacement } from "./placement.js";
import { estimateReplica } from "../placement/index.js";
import type { ModelCatalog } from "./service.js";

const hub = { url: "http://127.0.0.1:9" } as unknown as HubSource; // never asked: the sources are paths
const shape = (source: string): PlacedModel => ({ id: "m", source, contextSize: 512, sequences: 1, minReplicas: 0, maxReplicas: 1, idleUnloadS: 0 });

afterEach(() => vi.useRealTimers());

describe("catalogPlacement's sizes", () => {
  it("remembers a failed estimate for a minute, then reads the header again", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const file = join(tempDir(), "later.gguf"); // not there yet
    const placement = catalogPlacement({} as ModelCatalog, hub);
    const first = placement.size(shape(file));
    await expect(first).rejects.toThrow();
    copyFileSync(TINY_MODEL, file);
    expect(placement.size(shape(file))).toBe(first); // the failure stands: the header is not read again
    await vi.advanceTimersByTimeAsync(59_000);
    expect(placement.size(shape(file))).toBe(first);
    await vi.advanceTimersByTimeAsync(1_001);
    const again = placement.size(shape(file));
    expect(again).not.toBe(first);
    expect(await again).toBeGreaterThan(0);
    expect(placement.size(shape(file))).toBe(again); // a size is read once
  });

  it("takes memory_bytes as it is, and reads each source and shape once", async () => {
    const placement = catalogPlacement({} as ModelCatalog, hub);
    expect(await placement.size({ ...shape("/nowhere.gguf"), memoryBytes: 1234 })).toBe(1234);
    const one = placement.size(shape(TINY_MODEL));
    expect(placement.size(shape(TINY_MODEL))).toBe(one);
    expect(placement.size({ ...shape(TINY_MODEL), contextSize: 1024 })).not.toBe(one);
    expect(await one).toBeGreaterThan(0);
  });

  it("counts a draft model beside the replica: another file's own estimate, the model as its own draft its context only", async () => {
    const placement = catalogPlacement({} as ModelCatalog, hub);
    const other = join(tempDir(), "draft.gguf");
    copyFileSync(TINY_MODEL, other);
    const own = await estimateReplica(TINY_MODEL, shape(TINY_MODEL));
    const plain = await placement.size(shape(TINY_MODEL));
    expect(plain).toBe(own.bytes);
    // the draft's context no longer than the replica's, as the agent makes it
    expect(await placement.size({ ...shape(TINY_MODEL), speculative: `draft:${other}` })).toBe(
      own.bytes + (await estimateReplica(other, { ...shape(other), contextSize: own.contextSize })).bytes,
    );
    expect(own.contextBytes).toBeGreaterThan(0);
    expect(await placement.size({ ...shape(TINY_MODEL), speculative: `draft:${TINY_MODEL}` })).toBe(own.bytes + own.contextBytes);
    expect(await placement.size({ ...shape(TINY_MODEL), speculative: "lookup" })).toBe(own.bytes); // prompt lookup loads nothing
    // a draft only the nodes have (the scheduler cannot read its header): the model alone, not a size that fails
    expect(await placement.size({ ...shape(TINY_MODEL), speculative: "draft:/on/the/nodes/only.gguf" })).toBe(own.bytes);
  });

  it("reads a draft's header again a minute after it could not, and then counts it", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const placement = catalogPlacement({} as ModelCatalog, hub);
    const later = join(tempDir(), "draft-later.gguf"); // not there yet
    const drafted = { ...shape(TINY_MODEL), speculative: `draft:${later}` };
    const own = await estimateReplica(TINY_MODEL, shape(TINY_MODEL));
    expect(await placement.size(drafted)).toBe(own.bytes);
    copyFileSync(TINY_MODEL, later);
    expect(await placement.size(drafted)).toBe(own.bytes); // the model alone stands for a minute
    await vi.advanceTimersByTimeAsync(60_001);
    expect(await placement.size(drafted)).toBe(own.bytes + (await estimateReplica(later, { ...shape(later), contextSize: own.contextSize })).bytes);
  });
});

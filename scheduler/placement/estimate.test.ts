import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHub, type TestHub } from "../../test/helpers/hub.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { estimateReplica, headerLocation } from "./estimate.js";

let hub: TestHub;
beforeAll(async () => {
  hub = await startHub();
  hub.put("acme/tiny-GGUF", "tiny-Q8_0.gguf", { body: readFileSync(TINY_MODEL) });
  hub.manifest("acme/tiny-GGUF", "Q8_0", "tiny-Q8_0.gguf");
});
afterAll(() => hub.close());

describe("a replica's memory, from the GGUF header", () => {
  it("grows with the context and the sequences, and caps the context at the model's trained one", async () => {
    const small = await estimateReplica(TINY_MODEL, { contextSize: 256, sequences: 1 });
    const longer = await estimateReplica(TINY_MODEL, { contextSize: 1024, sequences: 1 });
    const wider = await estimateReplica(TINY_MODEL, { contextSize: 1024, sequences: 4 });
    expect(small.bytes).toBeGreaterThan(0);
    expect(longer.bytes).toBeGreaterThan(small.bytes);
    expect(wider.bytes).toBeGreaterThan(longer.bytes);
    const huge = await estimateReplica(TINY_MODEL, { contextSize: 1 << 20, sequences: 1 });
    expect(huge.contextSize).toBeLessThan(1 << 20);
    expect(huge).toEqual(await estimateReplica(TINY_MODEL, { contextSize: huge.contextSize, sequences: 1 }));
  });

  it("reads the header from the hub for hf: references (by file and by quantization) with the same result as from the file", async () => {
    const shape = { contextSize: 512, sequences: 2 };
    const local = await estimateReplica(TINY_MODEL, shape);
    for (const ref of ["hf:acme/tiny-GGUF/tiny-Q8_0.gguf", "hf:acme/tiny-GGUF:Q8_0"]) {
      const at = await headerLocation(ref, { url: hub.url });
      expect(at.file).toBe(`${hub.url}/acme/tiny-GGUF/resolve/main/tiny-Q8_0.gguf`);
      expect(await estimateReplica(at.file, shape)).toEqual(local);
    }
  });
});

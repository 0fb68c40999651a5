import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../test/helpers/fleet.js";
import { writeTinyLlama } from "./lib/tiny-llama.js";

describe("tiny GGUF fabrication", () => {
  it("is byte-identical for the same options and differs with the seed", async () => {
    const dir = tempDir();
    const hash = (f: string) => createHash("sha256").update(readFileSync(join(dir, f))).digest("hex");
    await writeTinyLlama(join(dir, "a.gguf"), { seed: 7 });
    await writeTinyLlama(join(dir, "b.gguf"), { seed: 7 });
    await writeTinyLlama(join(dir, "c.gguf"), { seed: 8 });
    expect(hash("a.gguf")).toBe(hash("b.gguf"));
    expect(hash("a.gguf")).not.toBe(hash("c.gguf"));
    expect(readFileSync(join(dir, "a.gguf")).subarray(0, 4).toString()).toBe("GGUF");
  });
});

/** system_fingerprint: the same file and build give the same one; a change at either end of the file, in its size or in the build gives another. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../test/helpers/fleet.js";
import { modelFingerprint } from "./fingerprint.js";

describe("modelFingerprint", () => {
  it("tells files and builds apart", async () => {
    const dir = tempDir();
    const big = Buffer.alloc(9 * 1024 * 1024, 7);
    const file = (name: string, bytes: Buffer) => {
      const path = join(dir, name);
      writeFileSync(path, bytes);
      return path;
    };
    const base = await modelFingerprint(file("a", big), "b1");
    expect(base).toMatch(/^fp_[0-9a-f]{12}$/);
    expect(await modelFingerprint(file("same", big), "b1")).toBe(base);
    expect(await modelFingerprint(file("same", big), "b2")).not.toBe(base);
    const tail = Buffer.from(big);
    tail[tail.length - 1] = 8;
    expect(await modelFingerprint(file("tail", tail), "b1")).not.toBe(base);
    const head = Buffer.from(big);
    head[0] = 8;
    expect(await modelFingerprint(file("head", head), "b1")).not.toBe(base);
    expect(await modelFingerprint(file("small", Buffer.from("gguf")), "b1")).not.toBe(base);
  });

  it("of a split GGUF, covers every part: a change in a later part gives another", async () => {
    const dir = tempDir();
    const write = (part: number, bytes: Buffer) => writeFileSync(join(dir, `m-0000${part}-of-00002.gguf`), bytes);
    write(1, Buffer.alloc(1000, 1));
    write(2, Buffer.alloc(1000, 2));
    const first = join(dir, "m-00001-of-00002.gguf");
    const base = await modelFingerprint(first, "b1");
    expect(await modelFingerprint(first, "b1")).toBe(base);
    write(2, Buffer.alloc(1000, 3));
    expect(await modelFingerprint(first, "b1")).not.toBe(base);
    write(2, Buffer.alloc(1001, 2));
    expect(await modelFingerprint(first, "b1")).not.toBe(base);
  });
});

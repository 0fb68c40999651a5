import { describe, expect, it } from "vitest";
import { randomId } from "./ids.js";

describe("randomId", () => {
  it("gives ids of the asked length that never repeat, across refills of its pool", () => {
    const ids = Array.from({ length: 2_000 }, () => randomId(12)); // 24 KB: six pools
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => /^[A-Za-z0-9_-]{16}$/.test(id))).toBe(true);
    expect(randomId(24, "hex")).toMatch(/^[0-9a-f]{48}$/);
  });

  it("hands out no byte twice: no id overlaps the next one, nor repeats one a pool later", () => {
    const bytes = Array.from({ length: 700 }, () => Buffer.from(randomId(12), "base64url")); // 8,400 bytes: past two refills
    // an id's last k bytes as the next one's first k: by chance for at most a few of 699 pairs (k = 1: about 3)
    for (let k = 1; k < 12; k++) {
      let overlaps = 0;
      for (let i = 0; i + 1 < bytes.length; i++) if (bytes[i]!.subarray(12 - k).equals(bytes[i + 1]!.subarray(0, k))) overlaps++;
      expect(overlaps, `ids overlapping by ${k} bytes`).toBeLessThan(30);
    }
    // a pool reused without a refill would repeat a whole id 4,096 bytes (341 ids) later
    for (let i = 0; i + 341 < bytes.length; i++) expect(bytes[i]!.equals(bytes[i + 341]!)).toBe(false);
  });

  it("refuses sizes that are not whole bytes the pool holds", () => {
    for (const bytes of [0, -1, 1.5, 4097, NaN]) expect(() => randomId(bytes)).toThrow(RangeError);
  });
});

import { describe, expect, it } from "vitest";
import { randomId } from "./ids.js";

describe("randomId", () => {
  it("gives ids of the asked length that never repeat, across refills of its pool", () => {
    const ids = Array.from({ length: 2_000 }, () => randomId(12)); // 24 KB: six pools
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => /^[A-Za-z0-9_-]{16}$/.test(id))).toBe(true);
    expect(randomId(24, "hex")).toMatch(/^[0-9a-f]{48}$/);
  });

  it("hands out no byte twice: consecutive ids share no bytes, nor the first ids of two pools", () => {
    const bytes = Array.from({ length: 700 }, () => Buffer.from(randomId(12), "base64url")); // 8,400 bytes: past two refills
    const seen = new Set(bytes.map((b) => b.toString("hex")));
    expect(seen.size).toBe(bytes.length);
    // a pool reused without a refill would repeat a whole id 4,096 bytes (341 ids) later
    for (let i = 0; i + 341 < bytes.length; i++) expect(bytes[i]!.equals(bytes[i + 341]!)).toBe(false);
  });

  it("refuses more bytes than its pool holds", () => {
    expect(() => randomId(4097)).toThrow(RangeError);
  });
});

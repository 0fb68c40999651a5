/** `--max-inflight` / `KILN_MAX_INFLIGHT`: per-tier caps on an account's chat completions in flight. */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../core/errors.js";
import { DEFAULT_MAX_INFLIGHT, parseSchedulerConfig } from "./index.js";

const parse = (maxInflight?: string) => parseSchedulerConfig({ nodeTokens: "a-long-enough-token-123", ...(maxInflight === undefined ? {} : { maxInflight }) }).maxInflight;

describe("--max-inflight", () => {
  it("defaults to free=4,standard=16,pro=64,enterprise=256", () => {
    expect(parse()).toEqual({ free: 4, standard: 16, pro: 64, enterprise: 256 });
    expect(DEFAULT_MAX_INFLIGHT).toEqual({ free: 4, standard: 16, pro: 64, enterprise: 256 });
  });

  it("a partial list changes only the tiers it names", () => {
    expect(parse("pro=10")).toEqual({ free: 4, standard: 16, pro: 10, enterprise: 256 });
    expect(parse(" Standard = 2 , free=1 ")).toEqual({ free: 1, standard: 2, pro: 64, enterprise: 256 });
    expect(parse("")).toEqual(DEFAULT_MAX_INFLIGHT);
  });

  it("takes 1000000, the largest cap", () => {
    expect(parse("pro=1000000").pro).toBe(1_000_000);
  });

  it.each([
    ["pro", 'expected TIER=N pairs like pro=64 (tiers: free, standard, pro, enterprise), got "pro"'],
    ["+pro=3", 'expected TIER=N pairs like pro=64 (tiers: free, standard, pro, enterprise), got "+pro=3"'],
    ["gold=3", 'unknown tier "gold" (tiers: free, standard, pro, enterprise)'],
    ["pro=0", /pro: expected a whole number from 1/],
    ["pro=-1", /expected TIER=N pairs/],
    ["pro=1.5", /expected TIER=N pairs/],
    ["pro=2000000", /pro: expected a whole number from 1 to 1000000/],
    ["pro=3,pro=4", /tier "pro" is named twice/],
  ] as [string, string | RegExp][])("%s is a ConfigError naming the flag and its variable", (value, message) => {
    let thrown: unknown;
    try {
      parse(value);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).key).toBe("--max-inflight / KILN_MAX_INFLIGHT");
    if (typeof message === "string") expect((thrown as Error).message).toBe(`--max-inflight / KILN_MAX_INFLIGHT: ${message}`);
    else expect((thrown as Error).message).toMatch(message);
  });
});

/** `--node-tokens` entries that bind models and slots, node-id rules, and the glob matcher's linear time. */
import { describe, expect, it } from "vitest";
import { globMatches, isValidNodeId, nodeIdMatcher, parseAgentConfig, parseNodeTokenEntry, parseSchedulerConfig } from "./index.js";

const TOKEN = "0123456789abcdef0123";

describe("node token entries with models and slots", () => {
  it("IDS;models:…;slots:N=TOKEN binds models (ids or globs) and a slot cap; the older forms parse as before", () => {
    expect(parseNodeTokenEntry(`gpu-*;models:famB-v3.1|whisper-*;slots:8=${TOKEN}`)).toEqual({ token: TOKEN, nodeIds: ["gpu-*"], models: ["famB-v3.1", "whisper-*"], slots: 8 });
    expect(parseNodeTokenEntry(`*;slots:2=${TOKEN}`)).toEqual({ token: TOKEN, nodeIds: ["*"], slots: 2 });
    expect(parseNodeTokenEntry(`gpu-1;models:qwen2.5:7b=${TOKEN}`)).toEqual({ token: TOKEN, nodeIds: ["gpu-1"], models: ["qwen2.5:7b"] });
    expect(parseNodeTokenEntry(`gpu-1|gpu-2=${TOKEN}`)).toEqual({ token: TOKEN, nodeIds: ["gpu-1", "gpu-2"] });
    expect(parseNodeTokenEntry(TOKEN)).toEqual({ token: TOKEN });
    // not a prefix: parsed as a bare token, = and ; in it included (the configuration refuses these: below)
    expect(parseNodeTokenEntry(`a;b=${TOKEN}`)).toEqual({ token: `a;b=${TOKEN}` });
    expect(parseNodeTokenEntry(`gpu;slots:x=${TOKEN}`)).toEqual({ token: `gpu;slots:x=${TOKEN}` });
    expect(parseSchedulerConfig({ nodeTokens: `gpu-*;slots:8=${TOKEN},${TOKEN}x` }).nodeTokens).toEqual([{ token: TOKEN, nodeIds: ["gpu-*"], slots: 8 }, { token: `${TOKEN}x` }]);
    expect(() => parseSchedulerConfig({ nodeTokens: `gpu;slots:0=${TOKEN}` })).toThrow(/entry 1: slots must be a whole number from 1 to 65536/);
    expect(parseSchedulerConfig({ nodeTokens: TOKEN }).maxNodeSlots).toBe(64);
    expect(parseSchedulerConfig({ nodeTokens: TOKEN, maxNodeSlots: "256" }).maxNodeSlots).toBe(256);
    expect(() => parseSchedulerConfig({ nodeTokens: TOKEN, maxNodeSlots: "0" })).toThrow(/--max-node-slots \/ KILN_MAX_NODE_SLOTS/);
  });

  it("an entry that holds ';', 'models:' or 'slots:' but is no prefix is refused at start, named by position, never taken as a bare token", () => {
    // a "," between models splits the entry: its first half would be a bare token any node id may use
    expect(() => parseSchedulerConfig({ nodeTokens: `gpu-node-1;models:famA-v1,famB-v2=${TOKEN}` })).toThrow(/entry 1: holds ";", "models:" or "slots:" but is not IDS/);
    expect(() => parseSchedulerConfig({ nodeTokens: `${TOKEN},gpu;slots:x=${TOKEN}` })).toThrow(/entry 2: holds/);
    expect(() => parseSchedulerConfig({ nodeTokens: `models:${TOKEN}` })).toThrow(/entry 1: holds/);
    expect(() => parseSchedulerConfig({ nodeTokens: `${TOKEN};x` })).toThrow(/entry 1: holds/);
    expect(() => parseSchedulerConfig({ nodeTokens: `gpu-node-1;models:famA-v1|famB-v2=${TOKEN}` })).not.toThrow();
  });

  it("a node id is 1–128 letters, digits, '.', '_' or '-', at Register and in --node-id", () => {
    expect(["gpu-1", "host.example.com", "a_b", "x".repeat(128)].map(isValidNodeId)).toEqual([true, true, true, true]);
    expect(["", "x".repeat(129), "gpu 1", "gpu/1", "gpu*", "é"].map(isValidNodeId)).toEqual([false, false, false, false, false, false]);
    expect(() => parseAgentConfig({ nodeId: "gpu 1", host: "127.0.0.1" })).toThrow(/--node-id \/ KILN_NODE_ID/);
  });
});

describe("globs", () => {
  it("match as before: * any run, everything else literal", () => {
    const m = nodeIdMatcher(["gpu-*", "a.b", "r*k-*-x", "(x)+"]);
    expect(["gpu-", "gpu-7", "a.b", "rack-1-x", "rk--x", "(x)+"].map(m)).toEqual([true, true, true, true, true, true]);
    expect(["gpu", "axb", "rack-1-y", "rk-x", "xx"].map(m)).toEqual([false, false, false, false, false]);
    expect(globMatches("*", "")).toBe(true);
    expect(globMatches("a*a", "a")).toBe(false);
    expect(globMatches("*ab*ab*", "abab")).toBe(true);
    expect(globMatches("*ab*ab*", "aba")).toBe(false);
  });

  it("in linear time: many stars against a long id that never matches take no backtracking", () => {
    const id = "a".repeat(100_000);
    const glob = `${"*a".repeat(50)}*b*`;
    const started = performance.now();
    for (let i = 0; i < 100; i++) expect(nodeIdMatcher([glob, `*${"a*".repeat(500)}c*`])(id)).toBe(false);
    // a backtracking regex over the same takes longer than any test's timeout; this, milliseconds
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

/** `--speculative`: its values, and the refusals naming the option. */
import { describe, expect, it } from "vitest";
import { parseAgentConfig } from "./index.js";

const base = { host: "127.0.0.1", serve: ["famB-v3.1=/m/a.gguf", "famC-k2=hf:org/repo/c.gguf"] };

describe("--speculative", () => {
  it("reads ID=lookup and ID=draft:GGUF (a path or an hf: reference), and defaults to none", () => {
    expect(parseAgentConfig(base).speculative).toEqual([]);
    const c = parseAgentConfig({ ...base, speculative: ["famB-v3.1=lookup", "famC-k2=draft:hf:org/repo/small.gguf"] });
    expect(c.speculative).toEqual([
      { id: "famB-v3.1", speculation: { kind: "lookup" } },
      { id: "famC-k2", speculation: { kind: "draft", source: "hf:org/repo/small.gguf" } },
    ]);
    expect(parseAgentConfig({ ...base, speculative: ["famB-v3.1=draft:/m/small.gguf"] }).speculative[0]!.speculation).toEqual({ kind: "draft", source: "/m/small.gguf" });
  });

  it("refuses a malformed value, an id not served and an id named twice, naming the option", () => {
    expect(() => parseAgentConfig({ ...base, speculative: ["famB-v3.1=ngram"] })).toThrow(/--speculative \/ KILN_SPECULATIVE: expected ID=lookup or ID=draft:GGUF.*got "ngram"/);
    expect(() => parseAgentConfig({ ...base, speculative: ["lookup"] })).toThrow(/--speculative \/ KILN_SPECULATIVE: expected ID=lookup/);
    expect(() => parseAgentConfig({ ...base, speculative: ["famB-v3.1=draft:hf:nope"] })).toThrow(/--speculative \/ KILN_SPECULATIVE/);
    expect(() => parseAgentConfig({ ...base, speculative: ["famD=lookup"] })).toThrow(/--speculative \/ KILN_SPECULATIVE: "famD" is not one of the --serve ids/);
    expect(() => parseAgentConfig({ ...base, speculative: ["famB-v3.1=lookup", "famB-v3.1=draft:/m/s.gguf"] })).toThrow(/"famB-v3.1" is named twice/);
  });
});

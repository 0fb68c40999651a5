/** One error base: every error Kiln names, whatever its area, is a KilnError with a code (the CLI prints its message, not a stack). */
import { describe, expect, it } from "vitest";

describe("one error base", () => {
  it("every family Kiln names is a KilnError with a code: HTTP answers, configuration, the engines, MCP's", async () => {
    const { ConfigError, KilnError, ApiError, UpstreamError } = await import("../core/errors.js");
    const { LlmEngineError, ModelNotServedError } = await import("../agent/llm/errors.js");
    const { AudioError, EngineError, JobAbortedError } = await import("../agent/asr/errors.js");
    const { MissingSecretError } = await import("../scheduler/mcp/secrets.js");
    const { PathEscapeError } = await import("../scheduler/mcp/filesystem.js");
    const { EgressDeniedError, EgressUnreachableError } = await import("../scheduler/mcp/egress.js");
    const errors = [
      new UpstreamError("agent_lost", "x"),
      new ConfigError("--db / KILN_DB", "x"),
      new LlmEngineError("engine_error", "x"),
      new ModelNotServedError("famB-v3.1"),
      new AudioError("x"),
      new EngineError("x"),
      new JobAbortedError(),
      new MissingSecretError("X"),
      new PathEscapeError("a"),
      new EgressDeniedError("10.0.0.1"),
      new EgressUnreachableError("x"),
    ];
    for (const e of errors) {
      expect(e, e.name).toBeInstanceOf(KilnError);
      expect(e.code, e.name).toMatch(/^[A-Za-z_]+$/);
      expect(e.name, e.constructor.name).toBe(e.constructor.name);
    }
    expect(errors.filter((e) => e instanceof ApiError).map((e) => e.name)).toEqual(["UpstreamError"]); // only HTTP answers carry a status
  });
});

describe("the wire codes", () => {
  it("every chat engine code that names a request field is one the scheduler answers as the client's fault (a 400, not a 502)", async () => {
    const { readFileSync } = await import("node:fs");
    const { CHAT_CLIENT_FAULTS } = await import("../core/wire-codes.js");
    // the engine's codes, as its error classes write them
    const codes = [...readFileSync("agent/llm/errors.ts", "utf8").matchAll(/super\("([a-z_]+)", `?([a-z_]+)?/g)].map((m) => m[1]!);
    const clientFaults = codes.filter((c) => c.startsWith("invalid_") || c === "context_length_exceeded");
    expect(clientFaults.length).toBeGreaterThanOrEqual(6);
    for (const code of clientFaults) expect(CHAT_CLIENT_FAULTS.has(code), code).toBe(true);
    for (const code of codes.filter((c) => !clientFaults.includes(c))) expect(CHAT_CLIENT_FAULTS.has(code), code).toBe(false); // model_load_failed, model_not_served: the node's
  });
});

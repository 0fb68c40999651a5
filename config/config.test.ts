import { describe, expect, it } from "vitest";
import { defaultThreads } from "../core/cpu.js";
import { ConfigError } from "../core/errors.js";
import { parseAgentConfig, parseSchedulerConfig } from "./index.js";

describe("configuration", () => {
  it("applies defaults and parses addresses and sizes", () => {
    const c = parseSchedulerConfig({ nodeTokens: "a-long-enough-token-123", maxBody: "2mb", http: "[::1]:9000" });
    expect(c.http).toEqual({ host: "::1", port: 9000 });
    expect(c.grpc).toEqual({ host: "127.0.0.1", port: 50051 });
    expect(c.maxBody).toBe(2 * 1024 * 1024);
    expect(c.nodeTokens).toEqual([{ token: "a-long-enough-token-123" }]);
  });

  it("names the flag and the variable of a bad value", () => {
    expect(() => parseSchedulerConfig({ nodeTokens: "a-long-enough-token-123", queueSize: "-1" })).toThrow(/--queue-size \/ KILN_QUEUE_SIZE/);
    expect(() => parseSchedulerConfig({ nodeTokens: "a-long-enough-token-123", http: "nowhere" })).toThrow(/--http \/ KILN_HTTP: expected HOST:PORT/);
    expect(() => parseSchedulerConfig({})).toThrow(ConfigError);
    expect(() => parseAgentConfig({ scheduler: "127.0.0.1:1", nodeToken: "a-long-enough-token-123", serve: ["no-equals-sign"] })).toThrow(
      /--serve \/ KILN_SERVE: expected ID=GGUF/,
    );
    expect(() => parseAgentConfig({ scheduler: "127.0.0.1:1", nodeToken: "a-long-enough-token-123", gpu: "tpu" })).toThrow(/--gpu/);
  });

  it("refuses --metrics-per-account without --metrics-token, naming both; takes them together", () => {
    const base = { nodeTokens: "a-long-enough-token-123" };
    expect(() => parseSchedulerConfig({ ...base, metricsPerAccount: "true" })).toThrow(/^--metrics-per-account \/ KILN_METRICS_PER_ACCOUNT: needs --metrics-token/);
    expect(() => parseSchedulerConfig({ ...base, metricsPerAccount: "true", metricsToken: "short" })).toThrow(/--metrics-token \/ KILN_METRICS_TOKEN: must be at least 16/);
    const c = parseSchedulerConfig({ ...base, metricsPerAccount: "true", metricsToken: "metrics-token-0123456" });
    expect([c.metricsPerAccount, c.metricsToken]).toEqual([true, "metrics-token-0123456"]);
    expect(parseSchedulerConfig(base).metricsToken).toBeUndefined();
  });

  it("defaults threads by the CPU backend installed and parses --serve pairs", () => {
    const c = parseAgentConfig({ host: "127.0.0.1", scheduler: "127.0.0.1:1", nodeToken: "a-long-enough-token-123", serve: ["famB-v3.1=/m/a.gguf", "famC-k2=/m/a.gguf"] });
    expect(c.threads).toBe(defaultThreads());
    // every core with the shared-threadpool backend; cores − 1 (at least 1) with node-llama-cpp's own
    expect([defaultThreads(2, true), defaultThreads(2, false), defaultThreads(1, false), defaultThreads(16, false)]).toEqual([2, 1, 1, 15]);
    expect(c.serve).toEqual([
      { id: "famB-v3.1", path: "/m/a.gguf" },
      { id: "famC-k2", path: "/m/a.gguf" },
    ]);
  });

  it("runs a transcription-only agent without a scheduler, and ties the fleet flags together", () => {
    const c = parseAgentConfig({ host: "127.0.0.1", maxUpload: "1gb", whisperMemory: "512mb" });
    expect(c.scheduler).toBeUndefined();
    expect(c.port).toBe(7860);
    expect(c.maxUpload).toBe(1024 ** 3);
    expect(c.whisperMemory).toBe(512 * 1024 ** 2);
    expect(c.asrParallel).toBeGreaterThanOrEqual(1);
    expect(() => parseAgentConfig({ host: "127.0.0.1", scheduler: "127.0.0.1:1" })).toThrow(/--node-token \/ KILN_NODE_TOKEN: is required with --scheduler/);
    expect(() => parseAgentConfig({ host: "127.0.0.1", segmentationModel: "/m/seg.onnx" })).toThrow(/--embedding-model \/ KILN_EMBEDDING_MODEL: is required/);
    expect(() => parseAgentConfig({ host: "127.0.0.1", serve: ["famB-v3.1=/m/a.gguf"], translationModel: "famC-k2" })).toThrow(/--translation-model/);
    expect(() => parseAgentConfig({ port: "70000" })).toThrow(/--port \/ KILN_PORT/);
  });
});

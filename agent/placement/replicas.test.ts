/** Replicas placed on a node: pulled from a hub on loopback, loaded into the real engine (the fabricated tiny model), unloaded. */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../core/log.js";
import { ModelHub } from "../../hub/index.js";
import { WhisperCatalog } from "../../models/whisper.js";
import { TINY_MODEL, tempDir } from "../../test/helpers/fleet.js";
import { startHub, type TestHub } from "../../test/helpers/hub.js";
import { LlmEngine } from "../llm/index.js";
import { Replicas, type ReplicaReport } from "./index.js";

const MB = 1e6;
let hub: TestHub;
let engine: LlmEngine;
let models: ModelHub;
let release: () => void;
beforeAll(async () => {
  hub = await startHub();
  hub.put("acme/tiny-GGUF", "tiny.gguf", { body: readFileSync(TINY_MODEL) });
  hub.put("acme/held-GGUF", "held.gguf", { body: readFileSync(TINY_MODEL), gate: new Promise<void>((r) => (release = r)) });
  hub.put("acme/draft-GGUF", "draft.gguf", { body: readFileSync(TINY_MODEL) });
  engine = await LlmEngine.load({ models: [], sequences: 1, contextSize: 256, threads: 1, gpu: "cpu", logger: createLogger("test", "silent") });
  models = new ModelHub({ source: { url: hub.url }, whisperDir: tempDir(), modelsDir: tempDir(), catalog: WhisperCatalog.builtin, reserveBytes: 0 });
});
afterAll(async () => {
  release?.();
  models?.close();
  await engine?.dispose();
  await hub?.close();
});

function replicas(budget = 500 * MB, offline = false, unloadGraceMs?: number, loadingEngine: LlmEngine = engine) {
  const reports: ReplicaReport[] = [];
  const r = new Replicas({
    engine: loadingEngine,
    hub: models,
    devices: [{ name: "cpu", totalBytes: 8000 * MB }],
    budgetBytes: budget,
    report: (x) => reports.push(x),
    offline,
    ...(unloadGraceMs !== undefined ? { unloadGraceMs } : {}),
    logger: createLogger("test", "silent"),
  });
  const until = async (phase: string, id: string) => {
    while (!reports.some((x) => x.modelId === id && x.phase === phase)) await new Promise((res) => setTimeout(res, 10));
  };
  return { r, reports, until };
}

describe("Replicas", () => {
  it("pulls an hf: model, loads it with the order's context and sequences, holds its bytes of the budget, and frees them when unloaded", async () => {
    const { r, reports, until } = replicas();
    expect(r.offered()).toEqual([{ name: "cpu", totalBytes: 500 * MB, freeBytes: 500 * MB }]);
    r.load({ modelId: "fam-a", source: "hf:acme/tiny-GGUF/tiny.gguf", contextSize: 512, sequences: 2, split: [200 * MB] });
    await until("ready", "fam-a");
    expect(reports[0]).toMatchObject({ modelId: "fam-a", phase: "loading" });
    const ready = reports.find((x) => x.phase === "ready")!;
    expect(ready.pool!.slots).toBe(2);
    expect(engine.serves("fam-a")).toBe(true);
    expect(r.offered()[0]!.freeBytes).toBe(300 * MB);
    r.load({ modelId: "fam-a", source: "hf:acme/tiny-GGUF/tiny.gguf", contextSize: 512, sequences: 2, split: [200 * MB] }); // again: its state, no second load
    expect(reports.at(-1)).toMatchObject({ modelId: "fam-a", phase: "ready" });
    await r.unload("fam-a");
    expect(reports.at(-1)).toMatchObject({ modelId: "fam-a", phase: "unloaded" });
    expect(engine.serves("fam-a")).toBe(false);
    expect(r.offered()[0]!.freeBytes).toBe(500 * MB);
  });

  it("reports the weights' load as progress, in steps of at least 1 %, rising to 0.99 and then READY", async () => {
    const { r, reports, until } = replicas();
    r.load({ modelId: "progress", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [100 * MB] });
    try {
      await until("ready", "progress");
      const loading = reports.filter((x) => x.modelId === "progress" && x.phase === "loading").map((x) => x.progress);
      expect(loading[0]).toBe(0); // the order taken
      const steps = loading.slice(1);
      expect(steps.length).toBeGreaterThan(2); // node-llama-cpp's progress as the weights load, not one jump at the end
      for (const [i, p] of steps.entries()) expect(p - (loading[i] ?? 0)).toBeGreaterThanOrEqual(0.01);
      expect(Math.max(...steps)).toBeLessThanOrEqual(0.99);
      expect(reports.filter((x) => x.modelId === "progress").at(-1)).toMatchObject({ phase: "ready", progress: 1 });
    } finally {
      await r.unload("progress");
    }
  });

  it("reports any gain of a load's progress once a minute has passed without a report, however small", async () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    try {
      // a load whose weights come in slower than 1 % a minute (node-llama-cpp's calls, as a huge file from a slow disk makes them)
      const slow = Object.create(engine) as LlmEngine;
      slow.addModel = (ids, path, shape, signal, onProgress) => {
        onProgress?.(0.001); // under a step, just after the last report: not reported
        vi.advanceTimersByTime(61_000);
        onProgress?.(0.002); // still under a step, but a minute on: reported
        return engine.addModel(ids, path, shape, signal);
      };
      const { r, reports, until } = replicas(500 * MB, false, undefined, slow);
      r.load({ modelId: "quiet", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [100 * MB] });
      await until("ready", "quiet");
      expect(reports.map((x) => [x.phase, Number(x.progress.toFixed(5))])).toEqual([
        ["loading", 0],
        ["loading", 0.00198],
        ["ready", 1],
      ]);
      await r.unload("quiet");
    } finally {
      vi.useRealTimers();
    }
  });

  it("an unload waits for the replica's running requests within the grace, and stops them past it", { timeout: 20_000 }, async () => {
    const { r, reports, until } = replicas(500 * MB, false, 1_000);
    const busy = async (id: string) => {
      r.load({ modelId: id, source: "hf:acme/tiny-GGUF/tiny.gguf", contextSize: 256, sequences: 1, split: [100 * MB] });
      await until("ready", id);
      const pool = engine.modelPools.find((p) => p.modelIds.includes(id))!;
      return { pool, slot: await pool.acquire() }; // a request running on the replica
    };
    const unloaded = (id: string) => reports.some((x) => x.modelId === id && x.phase === "unloaded");

    const within = await busy("grace-within");
    const first = r.unload("grace-within");
    await new Promise((res) => setTimeout(res, 200));
    expect(unloaded("grace-within")).toBe(false); // it waits for the request
    within.pool.release(within.slot);
    await first;
    expect(unloaded("grace-within")).toBe(true);

    await busy("grace-past"); // its request never ends
    await r.unload("grace-past"); // past the grace, it is stopped
    expect(unloaded("grace-past")).toBe(true);
    expect(engine.serves("grace-past")).toBe(false);
  });

  it("refuses an order it cannot carry out, naming why: a relative path, a split for other devices, more than is free", () => {
    const { r, reports } = replicas();
    r.load({ modelId: "x", source: "models/x.gguf", contextSize: 512, sequences: 1, split: [MB] });
    r.load({ modelId: "y", source: TINY_MODEL, contextSize: 512, sequences: 1, split: [MB, MB] });
    r.load({ modelId: "z", source: TINY_MODEL, contextSize: 512, sequences: 1, split: [600 * MB] });
    expect(reports.map((x) => [x.modelId, x.phase, x.reason])).toEqual([
      ["x", "failed", "the source is neither an hf: reference nor an absolute path to a .gguf file"],
      ["y", "failed", "the split names 2 devices; this node offers 1"],
      ["z", "failed", `device 0 (cpu) has ${500 * MB} bytes free of its offer, and the load asks ${600 * MB}`],
    ]);
    expect(engine.modelPools).toHaveLength(0);
  });

  it("loads a replica with the order's speculative decoding: prompt lookup, and a draft model pulled from the hub", async () => {
    const { r, reports, until } = replicas();
    r.load({ modelId: "spec-lookup", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [100 * MB], speculative: "lookup" });
    r.load({ modelId: "spec-draft", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [100 * MB], speculative: "draft:hf:acme/draft-GGUF/draft.gguf" });
    r.load({ modelId: "spec-none", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [100 * MB], speculative: "" });
    try {
      for (const id of ["spec-lookup", "spec-draft", "spec-none"]) await until("ready", id);
      const pool = (id: string) => reports.find((x) => x.modelId === id && x.phase === "ready")!.pool!;
      expect(pool("spec-lookup").speculation?.speculation).toEqual({ kind: "lookup" });
      // the draft pulled into --models-dir, loaded from there
      expect(pool("spec-draft").speculation?.speculation).toEqual({ kind: "draft", source: await models.cached("hf:acme/draft-GGUF/draft.gguf") });
      expect(pool("spec-none").speculation).toBeUndefined();
      // it generates through its predictor
      await engine.generate("spec-lookup", { prompt: "The cat sat on the mat. The dog sat on the" }, { temperature: 0, maxTokens: 40 });
      const gate = pool("spec-lookup").speculation!;
      expect(gate.validated + gate.refuted).toBeGreaterThan(0);
    } finally {
      for (const id of ["spec-lookup", "spec-draft", "spec-none"]) await r.unload(id);
    }
  });

  it("refuses a malformed speculative value, and fails a load whose draft model is missing, naming it", async () => {
    const { r, reports, until } = replicas();
    r.load({ modelId: "s1", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [MB], speculative: "ngram" });
    r.load({ modelId: "s2", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [MB], speculative: "draft:models/small.gguf" });
    r.load({ modelId: "s3", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [MB], speculative: "draft:/models/../small.gguf" });
    expect(reports.map((x) => [x.modelId, x.phase, x.reason])).toEqual([
      ["s1", "failed", 'speculative: expected "lookup" or "draft:GGUF" (a path or an hf: reference), got "ngram"'],
      ["s2", "failed", "speculative: the draft's source is neither an hf: reference nor an absolute path to a .gguf file"],
      ["s3", "failed", "speculative: the draft's source is neither an hf: reference nor an absolute path to a .gguf file"],
    ]);
    const missing = join(tempDir(), "missing.gguf");
    r.load({ modelId: "s4", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [MB], speculative: `draft:${missing}` });
    r.load({ modelId: "s5", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [MB], speculative: "draft:hf:acme/none-GGUF/none.gguf" });
    await until("failed", "s4");
    await until("failed", "s5");
    expect(reports.find((x) => x.modelId === "s4" && x.phase === "failed")!.reason).toBe(`speculative: the draft model: ${missing} is not a regular file on this node`);
    expect(reports.find((x) => x.modelId === "s5" && x.phase === "failed")!.reason).toMatch(
      /^speculative: the draft model: hf:acme\/none-GGUF\/none\.gguf could not be fetched from .* \(404\)$/,
    );
    // offline: a draft from the hub must be in --models-dir already
    const offline = replicas(500 * MB, true);
    offline.r.load({ modelId: "s6", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [MB], speculative: "draft:hf:acme/other-GGUF/other.gguf" });
    await offline.until("failed", "s6");
    expect(offline.reports.at(-1)!.reason).toBe("speculative: the draft model: hf:acme/other-GGUF/other.gguf is not in --models-dir and this node is --offline");
    expect(engine.modelPools).toHaveLength(0);
  });

  it("loads again a replica ordered while it is being unloaded, once the unload ends", async () => {
    const { r, reports, until } = replicas();
    r.load({ modelId: "again", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [100 * MB] });
    await until("ready", "again");
    const unloading = r.unload("again");
    r.load({ modelId: "again", source: TINY_MODEL, contextSize: 256, sequences: 1, split: [100 * MB] });
    await unloading;
    while (reports.filter((x) => x.phase === "ready").length < 2) await new Promise((res) => setTimeout(res, 10));
    // each load's progress is a run of "loading" reports
    expect(reports.map((x) => x.phase).filter((phase, i, all) => phase !== all[i - 1])).toEqual(["loading", "ready", "unloaded", "loading", "ready"]);
    expect(engine.serves("again")).toBe(true);
    await r.unload("again");
  });

  it("refuses a source that is not a regular file (a FIFO would hold the node's loads forever)", async () => {
    const { r, reports, until } = replicas();
    const fifo = join(tempDir(), "model.gguf");
    execFileSync("mkfifo", [fifo]);
    r.load({ modelId: "fifo", source: fifo, contextSize: 256, sequences: 1, split: [MB] });
    await until("failed", "fifo");
    expect(reports.at(-1)!.reason).toBe(`${fifo} is not a regular file on this node`);
  });

  it("stops a load still downloading when it is unloaded, and loads nothing", async () => {
    const { r, reports } = replicas();
    r.load({ modelId: "held", source: "hf:acme/held-GGUF/held.gguf", contextSize: 256, sequences: 1, split: [100 * MB] });
    await new Promise((res) => setTimeout(res, 200));
    await r.unload("held");
    release();
    await new Promise((res) => setTimeout(res, 200));
    expect(reports.map((x) => x.phase)).toEqual(["loading", "unloaded"]);
    expect(engine.serves("held")).toBe(false);
    expect(r.offered()[0]!.freeBytes).toBe(500 * MB);
  });
});

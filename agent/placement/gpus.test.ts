/**
 * Kiln passing its placement to llama.cpp on a node with two GPUs. No machine here has two, so the
 * node's GPUs are Mesa's lavapipe (Vulkan on the CPU) shown twice to llama.cpp's Vulkan backend
 * (`GGML_VK_VISIBLE_DEVICES=0,0`): llama.cpp sees two devices, and reports the model buffer it puts
 * on each, which this suite reads from the agent's log (llama.cpp's own lines, at --log-level trace).
 * Real scheduler, real placeable agent on node-llama-cpp's Vulkan binaries, real loads.
 */
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAgent, type AgentHandle } from "../index.js";
import { parseAgentConfig } from "../../config/index.js";
import { formatHostPort } from "../../core/net.js";
import { prebuiltBinsDir } from "../../core/prebuilt.js";
import { estimateReplica } from "../../scheduler/placement/index.js";
import type { SchedulerHandle } from "../../scheduler/index.js";
import { catalogFile, httpBase, inProcessScheduler, postChat, tempDir, TINY_MODEL, until } from "../../test/helpers/fleet.js";
import { NODE_TOKEN } from "../../test/helpers/secrets.js";

const ICDS = "/usr/share/vulkan/icd.d";
const lavapipe = existsSync(ICDS) && readdirSync(ICDS).some((f) => f.startsWith("lvp_icd"));
const vulkanBinaries = prebuiltBinsDir("vulkan") !== undefined;
const why = !lavapipe ? "Mesa's lavapipe is not installed (apt-get install mesa-vulkan-drivers)" : "node-llama-cpp's Vulkan binaries are not installed";
if (!lavapipe || !vulkanBinaries) console.warn(`agent/placement/gpus.test.ts: skipped: ${why}`);

const SHAPE = { context_size: 512, sequences: 1, idle_unload_s: 0 };

describe.skipIf(!lavapipe || !vulkanBinaries)("a replica's placement on a node's GPUs, as llama.cpp carries it out", () => {
  let scheduler: SchedulerHandle;
  let agent: AgentHandle;
  let key: string;
  const log: { msg: string; layout?: unknown }[] = [];

  beforeAll(async () => {
    // two devices for llama.cpp's Vulkan backend, read when it first loads (in this process: the agent below)
    process.env.GGML_VK_VISIBLE_DEVICES = "0,0";
    const size = (await estimateReplica(TINY_MODEL, { contextSize: SHAPE.context_size, sequences: SHAPE.sequences })).bytes;
    const catalog = catalogFile([
      { id: "fam-first", source: TINY_MODEL, ...SHAPE },
      { id: "fam-second", source: TINY_MODEL, ...SHAPE },
      // more than one device offers: it can only be split over both
      { id: "fam-wide", source: TINY_MODEL, ...SHAPE, memory_bytes: Math.floor(1.5 * size) },
    ]);
    scheduler = await inProcessScheduler({ catalog, queueTimeout: "60" });
    const logger = pino({ level: "trace" }, { write: (line: string) => void log.push(JSON.parse(line) as { msg: string }) });
    agent = await startAgent(
      parseAgentConfig({
        scheduler: formatHostPort(scheduler.grpc),
        nodeToken: NODE_TOKEN,
        serve: [],
        gpu: "vulkan",
        threads: "1",
        // each device offers 1.25 replicas of the catalog's shape
        memoryBudget: String(Math.floor(size * 2.5)),
        host: "127.0.0.1",
        port: "0",
        dataDir: tempDir(),
        offline: "true",
        logLevel: "trace",
      }),
      logger,
    );
    await until(() => scheduler.fleet.snapshot().length === 1, 15_000, "the agent to join");
    key = (await scheduler.keys.create({ account: "gpus", tier: "pro" })).token;
  }, 60_000);
  afterAll(async () => {
    await agent?.close();
    await scheduler?.close();
    delete process.env.GGML_VK_VISIBLE_DEVICES;
  });

  /** Requests `model` (placing it) and returns the model buffers llama.cpp put on each device for its load (MiB), and the layout Kiln logged. */
  async function place(model: string): Promise<{ buffers: Record<string, number>; layout: unknown }> {
    const from = log.length;
    const res = await postChat(httpBase(scheduler), key, { model, messages: [{ role: "user", content: "Hi" }], max_tokens: 2, temperature: 0 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const lines = log.slice(from);
    const buffers = Object.fromEntries(
      lines.flatMap((l) => {
        const m = /^load_tensors:\s+(Vulkan\d) model buffer size =\s+([\d.]+) MiB/.exec(l.msg);
        return m ? [[m[1]!, Number(m[2])]] : [];
      }),
    );
    return { buffers, layout: lines.find((l) => l.msg === "model loaded")?.layout };
  }
  const served = () => agent.engine.modelPools.flatMap((p) => p.modelIds).sort();

  it("offers the two GPUs llama.cpp sees, in its order", () => {
    const node = scheduler.fleet.snapshot()[0]!;
    expect(node.devices?.map((d) => d.name)).toEqual([expect.stringMatching(/^gpu0 llvmpipe/), expect.stringMatching(/^gpu1 llvmpipe/)]);
  });

  it("loads a replica planned for one GPU on that GPU alone, the second GPU included", async () => {
    const first = await place("fam-first");
    expect(first.layout).toEqual({ splitMode: "none", mainGpu: 0 });
    expect(Object.keys(first.buffers)).toEqual(["Vulkan0"]);
    // the first GPU is now too full for another: the plan names the second, and llama.cpp loads it there alone
    const second = await place("fam-second");
    expect(second.layout).toEqual({ splitMode: "none", mainGpu: 1 });
    expect(Object.keys(second.buffers)).toEqual(["Vulkan1"]);
  });

  it("splits a replica no one GPU can hold over both, in the planned proportions (not llama.cpp's own)", async () => {
    // fam-second becomes the least recently used: it makes room, and the first GPU keeps fam-first
    await place("fam-first");
    const { buffers, layout } = await place("fam-wide");
    expect(served()).toEqual(["fam-first", "fam-wide"]);
    // the plan: what each device has free, a sixth on the first and five sixths on the second
    const split = (layout as { tensorSplit: number[] }).tensorSplit;
    expect(layout).toMatchObject({ splitMode: "layer" });
    expect(split[0]).toBeCloseTo(1 / 6, 3);
    expect(split[1]).toBeCloseTo(5 / 6, 3);
    // llama.cpp's own split (by free memory, equal here) puts most of the model on the first device
    expect(Object.keys(buffers)).toEqual(["Vulkan0", "Vulkan1"]);
    expect(buffers.Vulkan1).toBeGreaterThan(buffers.Vulkan0!);
  });

  it("refuses a load whose placement names other devices than llama.cpp sees, naming both counts", async () => {
    await expect(agent.engine.addModel(["fam-odd"], TINY_MODEL, { sequences: 1, contextSize: 256, split: [1, 1, 1] })).rejects.toThrow(
      /its placement names 3 devices, and llama.cpp sees 2 GPUs on this node/,
    );
  });
});

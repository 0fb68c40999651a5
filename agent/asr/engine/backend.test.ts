/** Choosing the prebuilt folder whisper runs on (engine/backend.ts): the rule, and real probes of this machine's folders. */
import { describe, expect, it, vi } from "vitest";
import { createLogger } from "../../../core/log.js";
import { installedWhisperAddon, type PrebuiltKind } from "../../../core/prebuilt.js";
import { backendCandidates, chooseWhisperBackend, probeBackend } from "./backend.js";
import type { BackendDevice } from "./native.js";

const cpu: BackendDevice = { name: "CPU", description: "a CPU", type: "cpu" };
const h100: BackendDevice = { name: "CUDA0", description: "NVIDIA H100 80GB HBM3", type: "gpu" };

function recordingLogger() {
  const logger = createLogger("test", "silent");
  const warn = vi.spyOn(logger, "warn");
  return { logger, warn };
}

describe("chooseWhisperBackend", () => {
  it("tries CUDA, then Vulkan, then the CPU for auto; only the named kind, then the CPU, otherwise", () => {
    expect(backendCandidates("auto")).toEqual(["cuda", "vulkan", "cpu"]);
    expect(backendCandidates("cuda")).toEqual(["cuda", "cpu"]);
    expect(backendCandidates("vulkan")).toEqual(["vulkan", "cpu"]);
    expect(backendCandidates("metal")).toEqual(["cpu"]);
    expect(backendCandidates("cpu")).toEqual(["cpu"]);
  });

  it("takes the first installed folder whose probe finds a GPU, skips folders without the addon, and never probes for --gpu cpu", async () => {
    const probed: PrebuiltKind[] = [];
    const probe = async (kind: PrebuiltKind) => (probed.push(kind), kind === "vulkan" ? [cpu, h100] : [cpu]);
    const { logger, warn } = recordingLogger();
    expect(await chooseWhisperBackend("auto", logger, { probe, installed: () => true })).toEqual({ kind: "vulkan", gpu: true, devices: [cpu, h100] });
    expect(probed).toEqual(["cuda", "vulkan"]);
    expect(warn).not.toHaveBeenCalled(); // auto falling through CUDA without a GPU is not news
    probed.length = 0;
    expect(await chooseWhisperBackend("auto", logger, { probe, installed: (kind) => kind !== "vulkan" })).toEqual({ kind: "cpu", gpu: false, devices: [] });
    expect(probed).toEqual(["cuda"]);
    probed.length = 0;
    expect(await chooseWhisperBackend("cpu", logger, { probe, installed: () => true })).toEqual({ kind: "cpu", gpu: false, devices: [] });
    expect(probed).toEqual([]);
  });

  it("falls back to the CPU with a warning when the named GPU kind finds no GPU or its probe fails", async () => {
    const installed = () => true;
    const noGpu = recordingLogger();
    expect(await chooseWhisperBackend("cuda", noGpu.logger, { installed, probe: async () => [cpu] })).toEqual({ kind: "cpu", gpu: false, devices: [] });
    expect(noGpu.warn.mock.calls[0]?.[1]).toMatch(/--gpu cuda: whisper's cuda backend found no GPU; transcription runs on the CPU/);
    const crashed = recordingLogger();
    expect(
      await chooseWhisperBackend("cuda", crashed.logger, {
        installed,
        probe: async () => {
          throw new Error("the probe process ended (SIGSEGV)");
        },
      }),
    ).toMatchObject({ kind: "cpu", gpu: false });
    expect(crashed.warn.mock.calls[0]?.[0]).toMatchObject({ backend: "cuda", err: "the probe process ended (SIGSEGV)" });
  });
});

describe("probeBackend (real processes)", () => {
  it.skipIf(!installedWhisperAddon("cuda"))(
    "loads the CUDA folder's addon without a GPU driver and finds only the CPU; auto then runs whisper on the CPU folder",
    async () => {
      const devices = await probeBackend("cuda");
      expect(devices.length).toBeGreaterThan(0);
      expect(devices.every((d) => d.type === "cpu")).toBe(true);
      expect(await chooseWhisperBackend("auto", createLogger("test", "silent"))).toEqual({ kind: "cpu", gpu: false, devices: [] });
    },
    60_000,
  );

  it("rejects with the probe's own error for a folder without the addon", async () => {
    await expect(probeBackend("nonexistent" as PrebuiltKind)).rejects.toThrow(/not built for node-llama-cpp's nonexistent binaries/);
  });
});

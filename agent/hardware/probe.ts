/**
 * What the agent runs on, read with systeminformation: GPUs (model, memory, driver, CUDA), CPU,
 * memory and the disk of the data directory.
 * `compute` is what the chat engine actually loaded (a GPU may be present but unusable).
 */
import { existsSync } from "node:fs";
import { statfs } from "node:fs/promises";
import { resolve } from "node:path";
import si from "systeminformation";
import type { Hardware } from "../../proto/index.js";

const MIB = 1024 ** 2;

/** Total and free bytes of the filesystem holding `path` (0 when it cannot be read). */
export async function diskOf(path: string): Promise<{ total: number; free: number }> {
  try {
    const fs = await statfs(path);
    return { total: fs.blocks * fs.bsize, free: fs.bavail * fs.bsize };
  } catch {
    return { total: 0, free: 0 };
  }
}

/** What this node runs on; `dataDir` is the folder whose disk is reported. */
export async function probeHardware(compute: string, dataDir = "."): Promise<Hardware> {
  const [cpu, mem, graphics] = await Promise.all([
    si.cpu(),
    si.mem(),
    withTimeout(si.graphics(), 5000).catch(() => ({ controllers: [] as si.Systeminformation.GraphicsControllerData[] })),
  ]);
  const gpus = graphics.controllers
    .filter((g) => /nvidia|amd|advanced micro|apple/i.test(`${g.vendor} ${g.model}`) && (g.vram ?? 0) > 0)
    .map((g) => ({ model: g.model || g.name || "unknown GPU", memory_total_bytes: (g.memoryTotal ?? g.vram ?? 0) * MIB, driver: g.driverVersion ?? "" }));
  const disk = await diskOf(dataDir);
  // CUDA needs an NVIDIA GPU with its driver loaded (the device node exists).
  const cudaAvailable = gpus.some((g) => /nvidia/i.test(g.model)) && existsSync("/dev/nvidiactl");
  return {
    compute,
    gpus,
    cuda_available: cudaAvailable || compute === "cuda",
    disk_path: resolve(dataDir),
    disk_total_bytes: disk.total,
    cpu_model: `${cpu.manufacturer} ${cpu.brand}`.trim(),
    cpu_cores: cpu.cores,
    memory_total_bytes: mem.total,
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error("timed out")), ms).unref())]);
}

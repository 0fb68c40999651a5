/**
 * What the agent runs on, read with systeminformation: GPUs (model, memory, driver), CPU and memory.
 * `compute` is what the chat engine actually loaded (a GPU may be present but unusable).
 */
import si from "systeminformation";
import type { Hardware } from "../../proto/index.js";

const MIB = 1024 ** 2;

export async function probeHardware(compute: string): Promise<Hardware> {
  const [cpu, mem, graphics] = await Promise.all([
    si.cpu(),
    si.mem(),
    withTimeout(si.graphics(), 5000).catch(() => ({ controllers: [] as si.Systeminformation.GraphicsControllerData[] })),
  ]);
  const gpus = graphics.controllers
    .filter((g) => /nvidia|amd|advanced micro|apple/i.test(`${g.vendor} ${g.model}`) && (g.vram ?? 0) > 0)
    .map((g) => ({ model: g.model || g.name || "unknown GPU", memory_total_bytes: (g.memoryTotal ?? g.vram ?? 0) * MIB, driver: g.driverVersion ?? "" }));
  return {
    compute,
    gpus,
    cpu_model: `${cpu.manufacturer} ${cpu.brand}`.trim(),
    cpu_cores: cpu.cores,
    memory_total_bytes: mem.total,
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error("timed out")), ms).unref())]);
}

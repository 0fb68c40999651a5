/**
 * Which CPU backend node-llama-cpp will load: its own prebuilt variants, or the one
 * `scripts/build-llama.ts` built from the same llama.cpp release with Kiln's shared-threadpool
 * patch (`patches/ggml-cpu-shared-threadpool.patch`). The prebuilt backends start and join the
 * compute threads for every generated token, so a second thread makes generation slower there;
 * with the patched backend it makes it faster. The thread default depends on which one loads.
 *
 * The patched backend sits beside the stock variants and outranks them only on a CPU that has
 * every SIMD feature it was built with (a disk image built on another machine falls back to the
 * stock variants instead of dying on an illegal instruction).
 *
 * This module is also the CPU probing (/proc/cpuinfo: SIMD features, physical cores) and the thread
 * policy that follows from it, for the config, the agent and the build scripts alike.
 */
import { existsSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { prebuiltCpuBinsDir } from "./prebuilt.js";

/** The stamp `build-llama` writes next to the backend it installs. */
export const CPU_BACKEND_STAMP = "kiln-cpu-backend.json";
/** The installed backend's file name; the loader takes any `libggml-cpu-*.so`. */
export const CPU_BACKEND_FILE = "libggml-cpu-kiln.so";

export interface CpuBackendStamp {
  /** llama.cpp release of the source, as node-llama-cpp names it. */
  release: string;
  /** sha256 of the patch applied. */
  patch: string;
  /** The ggml CMake feature options it was built with. */
  features: string[];
}

let cachedCpuinfo: string | undefined;
/** /proc/cpuinfo, read once per process (empty where there is none). */
function cpuinfo(): string {
  if (cachedCpuinfo === undefined) {
    try {
      cachedCpuinfo = readFileSync("/proc/cpuinfo", "utf8");
    } catch {
      cachedCpuinfo = "";
    }
  }
  return cachedCpuinfo;
}

/** The CPU's feature flags as /proc/cpuinfo names them (empty where there is no /proc). */
export function cpuFlags(): Set<string> {
  const line = cpuinfo()
    .split("\n")
    .find((l) => l.startsWith("flags"));
  return new Set((line?.split(":")[1] ?? "").trim().split(/\s+/).filter(Boolean));
}

/** The ggml CMake options for the SIMD features an x86-64 CPU has (what the stock variants are cut by). */
export function x86Features(flags = cpuFlags()): string[] {
  const has = (...names: string[]) => names.every((n) => flags.has(n));
  const features: [string, boolean][] = [
    ["GGML_SSE42", has("sse4_2")],
    ["GGML_AVX", has("avx")],
    ["GGML_F16C", has("f16c")],
    ["GGML_FMA", has("fma")],
    ["GGML_AVX2", has("avx2")],
    ["GGML_BMI2", has("bmi2")],
    ["GGML_AVX_VNNI", has("avx_vnni")],
    ["GGML_AVX512", has("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")],
    ["GGML_AVX512_VBMI", has("avx512f", "avx512vbmi")],
    ["GGML_AVX512_VNNI", has("avx512f", "avx512_vnni")],
    ["GGML_AVX512_BF16", has("avx512f", "avx512_bf16")],
  ];
  return features.filter(([, on]) => on).map(([name]) => name);
}

/** The stamp of the installed patched backend, or undefined when node-llama-cpp's own loads (not installed, or built for features this CPU lacks). */
export function installedCpuBackend(): CpuBackendStamp | undefined {
  const dir = prebuiltCpuBinsDir();
  if (!dir || !existsSync(join(dir, CPU_BACKEND_FILE))) return undefined;
  try {
    const stamp = JSON.parse(readFileSync(join(dir, CPU_BACKEND_STAMP), "utf8")) as CpuBackendStamp;
    const here = new Set(x86Features());
    return stamp.features.every((f) => here.has(f)) ? stamp : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Physical cores, as llama.cpp counts them for its own default (hyperthread siblings share a core's
 * arithmetic units, so a thread on each rarely helps): distinct (physical id, core id) pairs in
 * /proc/cpuinfo, else the logical CPU count.
 */
export function physicalCores(text = cpuinfo()): number {
  const cores = new Set<string>();
  for (const block of text.split(/\n\s*\n/)) {
    const physical = /^physical id\s*:\s*(\d+)/m.exec(block)?.[1];
    const core = /^core id\s*:\s*(\d+)/m.exec(block)?.[1];
    if (physical !== undefined && core !== undefined) cores.add(`${physical}:${core}`);
  }
  return cores.size > 0 ? cores.size : cpus().length;
}

/**
 * The default number of compute threads: every physical core with the shared-threadpool backend
 * (measured faster than leaving one idle), else one fewer so that the event loop keeps a core (the
 * stock backend collapses when its threads take every core).
 */
export function defaultThreads(cores = physicalCores(), patched = installedCpuBackend() !== undefined): number {
  return patched ? Math.max(1, cores) : Math.max(1, cores - 1);
}

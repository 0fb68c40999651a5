/**
 * Which CPU backend node-llama-cpp will load: its own prebuilt variants, or the one
 * `scripts/build-llama.ts` built from the same llama.cpp release with Kiln's shared-threadpool
 * patch (`patches/ggml-cpu-shared-threadpool.patch`). The prebuilt backends start and join the
 * compute threads for every generated token, so a second thread makes generation slower there;
 * with the patched backend it makes it faster. The thread default depends on which one loads.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus } from "node:os";
import { dirname, join } from "node:path";

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

/** The folder of node-llama-cpp's prebuilt CPU binaries for this platform, if installed. */
export function prebuiltCpuBinsDir(): string | undefined {
  if (process.platform !== "linux") return undefined;
  const pkg = `@node-llama-cpp/linux-${process.arch}`;
  try {
    // resolved as node-llama-cpp resolves its optional dependency; the package exports only its entry
    const fromBinding = createRequire(createRequire(import.meta.url).resolve("node-llama-cpp"));
    const dir = join(dirname(dirname(fromBinding.resolve(pkg))), "bins", `linux-${process.arch}`);
    return existsSync(dir) ? dir : undefined;
  } catch {
    return undefined;
  }
}

/** The stamp of the installed patched backend, or undefined when node-llama-cpp's own loads. */
export function installedCpuBackend(): CpuBackendStamp | undefined {
  const dir = prebuiltCpuBinsDir();
  if (!dir || !existsSync(join(dir, CPU_BACKEND_FILE))) return undefined;
  try {
    return JSON.parse(readFileSync(join(dir, CPU_BACKEND_STAMP), "utf8")) as CpuBackendStamp;
  } catch {
    return undefined;
  }
}

/**
 * The default number of compute threads: every core with the shared-threadpool backend (measured
 * faster than leaving one idle), else cores − 1 so that the event loop keeps a core (the stock
 * backend collapses when its threads take every core).
 */
export function defaultThreads(cores = cpus().length, patched = installedCpuBackend() !== undefined): number {
  return patched ? Math.max(1, cores) : Math.max(1, cores - 1);
}

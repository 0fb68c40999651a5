/**
 * Which llama.cpp binaries this process has actually loaded, read from the process's own memory
 * map (Linux `/proc/self/maps`), not from what an install step says it put where: node-llama-cpp
 * picks a prebuilt folder (CPU, CUDA, Vulkan) at run time, and ggml loads its backend modules
 * from that folder as it finds devices.
 */
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { ADDON_FILE, ADDON_STAMP, STOCK_ADDON_FILE } from "../../core/prebuilt.js";

export interface LoadedBinaries {
  /** The loaded node-llama-cpp addon file, if any. */
  addon?: string;
  /** The prebuilt folder it came from (e.g. `linux-x64`, `linux-x64-cuda`). */
  folder?: string;
  /** Whether it is Kiln's build (sampling in the decode worker) rather than node-llama-cpp's own. */
  kilnAddon: boolean;
  /** ggml backend modules loaded (e.g. `libggml-cpu-kiln.so`, `libggml-cuda.so`). */
  backends: string[];
}

/** Reads the loaded binaries from `maps` (default: this process's `/proc/self/maps`; empty elsewhere). */
export function loadedBinaries(maps = readMaps()): LoadedBinaries {
  const files = new Set(
    maps
      .split("\n")
      .map((line) => line.slice(line.indexOf("/")))
      .filter((f) => f.startsWith("/")),
  );
  const addon = [...files].find((f) => basename(f) === ADDON_FILE || basename(f) === STOCK_ADDON_FILE);
  const backends = [...files]
    .map((f) => basename(f))
    .filter((f) => /^libggml-(?!base)[\w-]+\.so$/.test(f))
    .sort();
  return {
    ...(addon ? { addon, folder: basename(dirname(addon)) } : {}),
    // Kiln's install renames node-llama-cpp's addon to llama-addon.stock.node and stamps the folder.
    kilnAddon: addon !== undefined && basename(addon) === ADDON_FILE && existsSync(join(dirname(addon), ADDON_STAMP)),
    backends,
  };
}

function readMaps(): string {
  try {
    return readFileSync("/proc/self/maps", "utf8");
  } catch {
    return "";
  }
}

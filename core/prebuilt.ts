/**
 * node-llama-cpp's prebuilt binary folders (`@node-llama-cpp/linux-x64[-cuda|-vulkan]/bins/…`):
 * which are installed here. Each holds llama.cpp and ggml built for one kind of compute, with ggml's
 * backends as loadable modules; Kiln installs its own builds beside them (`scripts/build-llama.ts`:
 * the CPU backend and node-llama-cpp's addon; `scripts/build-whisper.ts`: the whisper addon), so
 * that they find those libraries by `$ORIGIN`.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** node-llama-cpp's addon, which it loads by this name. */
export const ADDON_FILE = "llama-addon.node";
/** Where node-llama-cpp's own addon is kept while Kiln's build of it is installed. */
export const STOCK_ADDON_FILE = "llama-addon.stock.node";

/** The prebuilt binary folders node-llama-cpp may load on Linux: its CPU build and, where installed, CUDA and Vulkan. */
export const PREBUILT_KINDS = ["cpu", "cuda", "vulkan"] as const;

/** What `--gpu` may ask for: a backend, or `auto` (the first that finds a real device, else the CPU). */
export const GPU_KINDS = ["auto", "cuda", "vulkan", "metal", "cpu"] as const;
export type GpuKind = (typeof GPU_KINDS)[number];
export type PrebuiltKind = (typeof PREBUILT_KINDS)[number];

/** The folder of node-llama-cpp's prebuilt binaries of `kind` for this platform, if installed. */
export function prebuiltBinsDir(kind: PrebuiltKind): string | undefined {
  if (process.platform !== "linux") return undefined;
  const name = kind === "cpu" ? `linux-${process.arch}` : `linux-${process.arch}-${kind}`;
  try {
    // resolved as node-llama-cpp resolves its optional dependencies; the packages export only their entry
    const fromBinding = createRequire(createRequire(import.meta.url).resolve("node-llama-cpp"));
    const dir = join(dirname(dirname(fromBinding.resolve(`@node-llama-cpp/${name}`))), "bins", name);
    return existsSync(join(dir, ADDON_FILE)) || existsSync(join(dir, STOCK_ADDON_FILE)) ? dir : undefined;
  } catch {
    return undefined;
  }
}

/** The folder of node-llama-cpp's prebuilt CPU binaries for this platform, if installed. */
export function prebuiltCpuBinsDir(): string | undefined {
  return prebuiltBinsDir("cpu");
}

/** Kiln's whisper addon (`native/whisper`), as `build-whisper` installs it in each prebuilt folder. */
export const WHISPER_ADDON_FILE = "kiln-whisper.node";
/** The stamp `build-whisper` writes beside it. */
export const WHISPER_ADDON_STAMP = "kiln-whisper.json";

export interface WhisperAddonStamp {
  /** The vendored whisper.cpp version. */
  whisper: string;
  /** llama.cpp release whose ggml headers it was compiled against. */
  release: string;
  /** sha256 of `native/whisper` (the addon and whisper.cpp sources). */
  sources: string;
  /** Compiler flags beyond -O3. */
  flags: string;
}

/** The whisper addon installed in the prebuilt folder of `kind`: its file and stamp, if built. */
export function installedWhisperAddon(kind: PrebuiltKind): { dir: string; file: string; stamp: WhisperAddonStamp } | undefined {
  const dir = prebuiltBinsDir(kind);
  if (!dir || !existsSync(join(dir, WHISPER_ADDON_FILE))) return undefined;
  try {
    return { dir, file: join(dir, WHISPER_ADDON_FILE), stamp: JSON.parse(readFileSync(join(dir, WHISPER_ADDON_STAMP), "utf8")) as WhisperAddonStamp };
  } catch {
    return undefined;
  }
}

/** The stamp `build-llama` writes next to the addon it builds. */
export const ADDON_STAMP = "kiln-addon.json";
export interface AddonStamp {
  /** llama.cpp release whose headers it was compiled against. */
  release: string;
  /** sha256 of node-llama-cpp's addon sources (as patched by patches/npm) it was built from. */
  sources: string;
}

/**
 * The stamp of Kiln's build of node-llama-cpp's addon (its decode worker also samples the token,
 * see `patches/npm`), or undefined when node-llama-cpp's prebuilt addon loads.
 */
export function installedAddon(kind: PrebuiltKind = "cpu"): AddonStamp | undefined {
  const dir = prebuiltBinsDir(kind);
  if (!dir || !existsSync(join(dir, STOCK_ADDON_FILE))) return undefined;
  try {
    return JSON.parse(readFileSync(join(dir, ADDON_STAMP), "utf8")) as AddonStamp;
  } catch {
    return undefined;
  }
}

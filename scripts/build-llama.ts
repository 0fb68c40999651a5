/**
 * Builds the parts of llama.cpp that Kiln needs, from the very source node-llama-cpp ships
 * (`node_modules/node-llama-cpp/llama/gitRelease.bundle`, a git bundle of its llama.cpp release):
 *
 *   node dist/scripts/build-llama.js             # the patched CPU backend, installed into node-llama-cpp (runs from `prepare`)
 *   node dist/scripts/build-llama.js --restore   # remove it: node-llama-cpp's own CPU backends load again
 *   node dist/scripts/build-llama.js --tools     # llama-bench, llama-server, llama-quantize from the unpatched source (for bench-chat)
 *   node dist/scripts/build-llama.js --tools --cuda   # the same with CUDA (on a GPU machine with nvcc; bench-chat --gpu)
 *   node dist/scripts/build-llama.js --force     # rebuild even when the stamp matches
 *
 * Why: node-llama-cpp's prebuilt CPU backends are built without OpenMP, and its addon attaches no
 * threadpool to a context, so ggml starts and joins `threads − 1` threads for every graph, that is
 * for every generated token; with two threads on two cores generation gets slower, not faster.
 * `patches/ggml-cpu-shared-threadpool.patch` keeps a few threadpools alive for the whole process
 * instead, each with a persistent leader thread, so every graph runs on the same threads (ggml-cpu.c),
 * and ranks this build above the stock variants where the CPU has its features (cpu-feats.cpp).
 * Only the CPU backend module is rebuilt (about 45 s on two cores), with the SIMD features this
 * CPU reports, and installed as `libggml-cpu-kiln.so` beside node-llama-cpp's own variants and
 * libggml-base. Linux x86-64 only; elsewhere, or without cmake, git and a compiler, the stock
 * backend stays and the agent defaults to cores − 1 threads. `KILN_SKIP_LLAMA_BUILD=1` skips it.
 *
 * Then node-llama-cpp's addon itself (about 25 s per folder, for the CPU folder and the CUDA and
 * Vulkan ones where installed): `patches/npm` makes its decode worker also sample
 * the batch's next tokens, which saves a thread-pool round trip per generated token, on up to the
 * context's threads at once when the batch's sequences have many candidates to read (a large
 * vocabulary, many streams). Its sources ship
 * in the package; `scripts/llama-addon/CMakeLists.txt` compiles them against the bundled release's
 * headers and links the libraries already in the prebuilt folder, so llama.cpp itself stays
 * node-llama-cpp's build. node-llama-cpp's own addon is kept as `llama-addon.stock.node`; the
 * patched JavaScript works with either (the stock addon ignores what it is not asked for).
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CPU_BACKEND_FILE, CPU_BACKEND_STAMP, installedCpuBackend, x86Features, type CpuBackendStamp } from "../core/cpu.js";
import { ADDON_FILE, ADDON_STAMP, installedAddon, prebuiltBinsDir, prebuiltCpuBinsDir, PREBUILT_KINDS, STOCK_ADDON_FILE, type AddonStamp } from "../core/prebuilt.js";
import { run } from "./lib/run.js";
import { sha256File, sha256Tree } from "./lib/hash.js";

const require = createRequire(import.meta.url);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** Where sources and builds live (ignored by git). */
export const CACHE_DIR = join(ROOT, ".cache");
const PATCH = join(ROOT, "patches", "ggml-cpu-shared-threadpool.patch");
/** The compilers' output. */
const LOG = join(CACHE_DIR, "build-llama.log");

function llamaPackageDir(): string {
  // the package exports only its entry (dist/index.js)
  return join(dirname(dirname(require.resolve("node-llama-cpp"))), "llama");
}

/** The llama.cpp release node-llama-cpp bundles, e.g. "v0.5.0". */
export function bundledRelease(): string {
  return (JSON.parse(readFileSync(join(llamaPackageDir(), "llama.cpp.info.json"), "utf8")) as { tag: string }).tag;
}

/**
 * Clones the bundled source into `.cache/<name>` (once per release); applies `patch` to a fresh clone.
 * `KILN_LLAMA_SOURCE` names an unpacked copy of the pristine source to use instead (the GPU machine's
 * packed project leaves the 35 MB git bundle out; `scripts/gpu/pack.sh`).
 */
function source(name: string, patch?: string): string {
  if (!patch && process.env.KILN_LLAMA_SOURCE) return process.env.KILN_LLAMA_SOURCE;
  const dir = join(CACHE_DIR, name);
  const marker = join(dir, ".kiln-source");
  const wanted = `${bundledRelease()} ${patch ? sha256File(patch) : "pristine"}`;
  if (existsSync(marker) && readFileSync(marker, "utf8") === wanted) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(CACHE_DIR, { recursive: true });
  run("git", ["-c", "advice.detachedHead=false", "clone", "--quiet", join(llamaPackageDir(), "gitRelease.bundle"), dir]);
  if (patch) run("git", ["apply", patch], { cwd: dir, log: LOG });
  writeFileSync(marker, wanted);
  return dir;
}

const COMMON_CMAKE = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"];

/** Builds the patched CPU backend module; returns its path and stamp. */
export function buildCpuBackend(): { file: string; stamp: CpuBackendStamp } {
  const features = x86Features();
  const src = source("llama.cpp-kiln", PATCH);
  const build = join(src, "build-cpu");
  run(
    "cmake",
    [
      "-S",
      src,
      "-B",
      build,
      ...COMMON_CMAKE,
      "-DLLAMA_BUILD_TOOLS=OFF",
      "-DLLAMA_BUILD_SERVER=OFF",
      "-DBUILD_SHARED_LIBS=ON",
      "-DGGML_BACKEND_DL=ON",
      "-DGGML_NATIVE=OFF",
      "-DGGML_OPENMP=OFF",
      // node-llama-cpp's libggml-base.so has an unversioned soname; link against the same name.
      "-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON",
      ...features.map((f) => `-D${f}=ON`),
    ],
    { log: LOG },
  );
  run("cmake", ["--build", build, "-j", String(cpus().length), "--target", "ggml-cpu"], { log: LOG });
  return { file: join(build, "bin", "libggml-cpu.so"), stamp: { release: bundledRelease(), patch: sha256File(PATCH), features } };
}

/**
 * Installs a built backend into node-llama-cpp's prebuilt CPU folder, beside its own variants
 * (the patch ranks it above them where this CPU has its features).
 */
export function installCpuBackend(file: string, stamp: CpuBackendStamp, dir: string): void {
  installBeside(file, dir, CPU_BACKEND_FILE, CPU_BACKEND_STAMP, stamp);
}

/**
 * Puts a built `file` into prebuilt folder `dir` as `name` (through a temporary name and a rename,
 * so a loader never sees half a file), and its stamp beside it as `stampName`.
 */
export function installBeside(file: string, dir: string, name: string, stampName: string, stamp: object): void {
  copyFileSync(file, join(dir, `${name}.tmp`));
  renameSync(join(dir, `${name}.tmp`), join(dir, name));
  writeFileSync(join(dir, stampName), JSON.stringify(stamp, null, 2));
}

/** Removes Kiln's backend, leaving node-llama-cpp's own variants. */
export function restoreCpuBackend(dir: string): void {
  rmSync(join(dir, CPU_BACKEND_FILE), { force: true });
  rmSync(join(dir, CPU_BACKEND_STAMP), { force: true });
}

/** node-llama-cpp's addon sources (C++), as patch-package left them. */
function addonSourcesDir(): string {
  return join(llamaPackageDir(), "addon");
}

/**
 * Builds node-llama-cpp's addon from its sources (patched by `patches/npm`: the decode worker also
 * samples the batch's tokens, on several threads when there are many) against the bundled release's headers, linked to the llama.cpp and
 * ggml libraries already in `dir`, node-llama-cpp's prebuilt folder; about 25 s on two cores.
 * `sources` is the sources' hash, for the stamp. Returns the built file once it loads with every
 * symbol resolved.
 */
export function buildAddon(dir: string, sources: string, buildName = "build-addon"): { file: string; stamp: AddonStamp } {
  const { nodeInclude, napiInclude } = addonHeaders();
  // the libraries the prebuilt addon links: libllama[.cuda|.vulkan].<release>.so, libllama-common.so, libggml[.cuda|.vulkan].<release>.so, libggml-base.so
  const libraries = readdirSync(dir)
    .filter((f) => /^lib(llama|llama-common|ggml|ggml-base)(\.(cuda|vulkan))?(\.v[\w.-]+)?\.so$/.test(f))
    .map((f) => join(dir, f));
  const src = source("llama.cpp-kiln", PATCH); // its headers are the release's own: the patch changes two .c/.cpp files
  const build = join(CACHE_DIR, buildName);
  run(
    "cmake",
    [
      "-S",
      join(ROOT, "scripts", "llama-addon"),
      "-B",
      build,
      "-DCMAKE_BUILD_TYPE=Release",
      `-DNLC_ADDON_DIR=${addonSourcesDir()}`,
      `-DLLAMA_SOURCE=${src}`,
      `-DNODE_INCLUDE=${nodeInclude}`,
      `-DNAPI_INCLUDE=${napiInclude}`,
      `-DLINK_LIBRARIES=${libraries.join(";")}`,
    ],
    { log: LOG },
  );
  run("cmake", ["--build", build, "-j", String(cpus().length)], { log: LOG });
  const file = join(build, ADDON_FILE);
  checkLoads(file, dir);
  return { file, stamp: { release: bundledRelease(), sources } };
}

/**
 * The headers a Node addon compiles against: Node-API's (node_api.h: Node's own beside its binary,
 * else the node-api-headers package's, the same ABI-stable API) and node-addon-api's (napi.h).
 */
export function addonHeaders(): { nodeInclude: string; napiInclude: string } {
  const own = join(dirname(dirname(process.execPath)), "include", "node");
  const nodeInclude = existsSync(join(own, "node_api.h")) ? own : join(dirname(require.resolve("node-api-headers/package.json")), "include");
  return { nodeInclude, napiInclude: dirname(require.resolve("node-addon-api/package.json")) };
}

/** The ggml headers of the bundled llama.cpp release (what node-llama-cpp's prebuilt ggml was built from). */
export function ggmlHeaders(): string {
  return join(source("llama.cpp-kiln", PATCH), "ggml", "include"); // the patch changes .c/.cpp files only
}

/**
 * Loads a built addon `file` as it will be loaded, beside the libraries of prebuilt folder `dir`,
 * with every symbol bound now: a mismatch fails the build, not the agent. (A GPU folder's
 * libraries link ggml only; ggml opens its CUDA or Vulkan module at run time, so this needs no GPU driver.)
 */
export function checkLoads(file: string, dir: string): void {
  const check = spawnSync(process.execPath, ["-e", `process.dlopen({ exports: {} }, ${JSON.stringify(file)})`], {
    env: { ...process.env, LD_LIBRARY_PATH: dir, LD_BIND_NOW: "1" },
    encoding: "utf8",
  });
  if (check.status !== 0) throw new Error(`the built addon ${file} does not load: ${check.stderr.trim().split("\n")[0]}`);
}

/** Installs a built addon in place of node-llama-cpp's own, which is kept beside it. */
export function installAddon(file: string, stamp: AddonStamp, dir: string): void {
  if (!existsSync(join(dir, STOCK_ADDON_FILE))) renameSync(join(dir, ADDON_FILE), join(dir, STOCK_ADDON_FILE));
  installBeside(file, dir, ADDON_FILE, ADDON_STAMP, stamp);
}

/** Puts node-llama-cpp's own addon back. */
export function restoreAddon(dir: string): void {
  if (existsSync(join(dir, STOCK_ADDON_FILE))) renameSync(join(dir, STOCK_ADDON_FILE), join(dir, ADDON_FILE));
  rmSync(join(dir, ADDON_STAMP), { force: true });
}

/** llama.cpp's own reference programs, built from the unpatched release (the benchmark's baseline). */
export interface LlamaTools {
  bench: string;
  server: string;
  quantize: string;
  /** With `cuda`: the CUDA backend module this build made. */
  cudaBackend?: string;
}

/**
 * Finds or builds `llama-bench`, `llama-server` and `llama-quantize` (about 10 minutes on two cores
 * the first time; with `cuda`, about 5.5 minutes on 16 cores, for this machine's GPU architecture,
 * needing `nvcc`). With `cuda` and `KILN_CUDA_MODULE` naming a `libggml-cuda.so` an earlier run built
 * from the same release, no CUDA is compiled: the tools are built for ggml's backend modules and that
 * module is put beside them (ggml loads it at run time, as it loads the one it would have built).
 * With `cuda`, node-llama-cpp's CUDA folder is also given that module when it lacks one (a packed copy
 * of the project leaves out the 159 MB prebuilt), so that Kiln's engine runs on CUDA beside the tools;
 * throws when node-llama-cpp's CUDA binaries are not installed.
 */
export function buildTools(options: { cuda?: boolean } = {}): LlamaTools {
  const tools = findOrBuildTools(options);
  if (tools.cudaBackend) provideCudaBackend(tools.cudaBackend);
  return tools;
}

function findOrBuildTools(options: { cuda?: boolean }): LlamaTools {
  const src = source("llama.cpp");
  const build = join(src, options.cuda ? "build-cuda" : "build");
  const bin = join(build, "bin");
  const tools: LlamaTools = {
    bench: join(bin, "llama-bench"),
    server: join(bin, "llama-server"),
    quantize: join(bin, "llama-quantize"),
    ...(options.cuda ? { cudaBackend: join(bin, "libggml-cuda.so") } : {}),
  };
  if ([tools.bench, tools.server, tools.quantize, tools.cudaBackend].every((f) => f === undefined || existsSync(f))) return tools;
  // a CUDA module an earlier run built from this release (scripts/gpu/device.sh carries it back): no CUDA to compile
  const carried = options.cuda ? process.env.KILN_CUDA_MODULE : undefined;
  if (carried && !existsSync(carried)) throw new Error(`KILN_CUDA_MODULE: ${carried} does not exist`);
  console.log(
    `build-llama: building llama-bench, llama-server and llama-quantize${options.cuda ? (carried ? ` for ggml's backend modules, with the CUDA module ${carried}` : " with CUDA") : ""} from llama.cpp ${bundledRelease()}…`,
  );
  const modules = ["-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON", "-DGGML_NATIVE=OFF", "-DLLAMA_OPENSSL=OFF"];
  const cuda = options.cuda ? (carried ? modules : ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=native", ...modules]) : [];
  run("cmake", ["-S", src, "-B", build, ...COMMON_CMAKE, ...cuda], { log: LOG });
  run("cmake", ["--build", build, "-j", String(cpus().length), "--target", "llama-bench", "llama-server", "llama-quantize", ...(options.cuda && !carried ? ["ggml-cuda"] : [])], {
    log: LOG,
  });
  if (carried) copyFileSync(carried, tools.cudaBackend!);
  return tools;
}

/** Puts a CUDA backend module built from the same release into node-llama-cpp's CUDA folder when that folder lacks one. */
function provideCudaBackend(file: string): void {
  const dir = prebuiltBinsDir("cuda");
  if (!dir) throw new Error("node-llama-cpp's CUDA binaries (@node-llama-cpp/linux-x64-cuda) are not installed");
  if (!existsSync(join(dir, "libggml-cuda.so"))) copyFileSync(file, join(dir, "libggml-cuda.so"));
}

/** ggml's source as the bundled llama.cpp release has it, pristine (for programs built with their own ggml). */
export function ggmlSource(): string {
  return join(source("llama.cpp"), "ggml");
}

/** llama.cpp's tools' flags for every layer on the GPU (with `gpu`), as the benchmarks run them there. */
export const offloadFlags = (gpu: boolean): string[] => (gpu ? ["-ngl", "99"] : []);

/** A tokenizer-only GGUF from llama.cpp's source (`models/ggml-vocab-<name>.gguf`, e.g. `llama-bpe`: Llama 3's). */
export function vocabGguf(name: string): string {
  return join(source("llama.cpp"), "models", `ggml-vocab-${name}.gguf`);
}

function main(): void {
  const args = process.argv.slice(2);
  if (args.includes("--tools")) {
    const tools = buildTools({ cuda: args.includes("--cuda") });
    console.log(`build-llama: ${tools.bench}\nbuild-llama: ${tools.server}\nbuild-llama: ${tools.quantize}`);
    return;
  }
  const dir = prebuiltCpuBinsDir();
  if (args.includes("--restore")) {
    if (dir) restoreCpuBackend(dir);
    for (const kind of PREBUILT_KINDS) {
      const kindDir = prebuiltBinsDir(kind);
      if (kindDir) restoreAddon(kindDir);
    }
    console.log("build-llama: node-llama-cpp's own CPU backends and addon restored");
    return;
  }
  if (process.env.KILN_SKIP_LLAMA_BUILD) return console.log("build-llama: skipped (KILN_SKIP_LLAMA_BUILD)");
  if (!dir || process.arch !== "x64") return console.log("build-llama: not Linux x86-64; node-llama-cpp's own CPU backend stays");
  const force = args.includes("--force");
  const backend = installedCpuBackend();
  const features = x86Features();
  if (!force && backend && backend.release === bundledRelease() && backend.patch === sha256File(PATCH) && backend.features.join() === features.join()) {
    console.log("build-llama: the shared-threadpool CPU backend is already installed");
  } else {
    buildStep("the shared-threadpool CPU backend", `${features.length} SIMD features`, () => {
      const { file, stamp } = buildCpuBackend();
      installCpuBackend(file, stamp, dir);
    });
  }
  // The addon, for every prebuilt folder node-llama-cpp may load (CPU, and CUDA or Vulkan where installed).
  const sources = sha256Tree(addonSourcesDir());
  for (const kind of PREBUILT_KINDS) {
    const kindDir = prebuiltBinsDir(kind);
    if (!kindDir) continue;
    const addon = installedAddon(kind);
    const what = `the ${kind === "cpu" ? "CPU" : kind === "cuda" ? "CUDA" : "Vulkan"} folder's addon that samples in its decode worker`;
    if (!force && addon && addon.release === bundledRelease() && addon.sources === sources) {
      console.log(`build-llama: ${what} is already installed`);
      continue;
    }
    buildStep(what, "node-llama-cpp's sources as patches/npm patches them", () => {
      const { file, stamp } = buildAddon(kindDir, sources, kind === "cpu" ? "build-addon" : `build-addon-${kind}`);
      installAddon(file, stamp, kindDir);
    });
  }
}

/**
 * Runs one build-and-install step. A failure only warns: the agent works with node-llama-cpp's own
 * binaries (slower), so it must never fail `npm install`.
 */
function buildStep(what: string, detail: string, step: () => void): void {
  try {
    const started = Date.now();
    step();
    console.log(`build-llama: installed ${what} (${detail}) in ${Math.round((Date.now() - started) / 1000)} s`);
  } catch (err) {
    console.warn(`build-llama: could not build ${what} (${err instanceof Error ? err.message : String(err)}); node-llama-cpp's own stays`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main();

/**
 * Builds the parts of llama.cpp that Kiln needs, from the very source node-llama-cpp ships
 * (`node_modules/node-llama-cpp/llama/gitRelease.bundle`, a git bundle of its llama.cpp release):
 *
 *   node dist/scripts/build-llama.js             # the patched CPU backend, installed into node-llama-cpp (runs from `prepare`)
 *   node dist/scripts/build-llama.js --restore   # remove it: node-llama-cpp's own CPU backends load again
 *   node dist/scripts/build-llama.js --tools     # llama-bench and llama-server from the unpatched source (for bench-chat)
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
 */
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CPU_BACKEND_FILE, CPU_BACKEND_STAMP, installedCpuBackend, prebuiltCpuBinsDir, x86Features, type CpuBackendStamp } from "../agent/llm/cpu-backend.js";
import { run } from "./lib/run.js";

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

/** Clones the bundled source into `.cache/<name>` (once per release); applies `patch` to a fresh clone. */
function source(name: string, patch?: string): string {
  const dir = join(CACHE_DIR, name);
  const marker = join(dir, ".kiln-source");
  const wanted = `${bundledRelease()} ${patch ? sha256(patch) : "pristine"}`;
  if (existsSync(marker) && readFileSync(marker, "utf8") === wanted) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(CACHE_DIR, { recursive: true });
  run("git", ["-c", "advice.detachedHead=false", "clone", "--quiet", join(llamaPackageDir(), "gitRelease.bundle"), dir]);
  if (patch) run("git", ["apply", patch], { cwd: dir, log: LOG });
  writeFileSync(marker, wanted);
  return dir;
}

function sha256(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

const COMMON_CMAKE = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"];

/** Builds the patched CPU backend module; returns its path and stamp. */
export function buildCpuBackend(): { file: string; stamp: CpuBackendStamp } {
  const features = x86Features();
  const src = source("llama.cpp-kiln", PATCH);
  const build = join(src, "build-cpu");
  run("cmake", ["-S", src, "-B", build, ...COMMON_CMAKE, "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF",
    "-DBUILD_SHARED_LIBS=ON", "-DGGML_BACKEND_DL=ON", "-DGGML_NATIVE=OFF", "-DGGML_OPENMP=OFF",
    // node-llama-cpp's libggml-base.so has an unversioned soname; link against the same name.
    "-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON", ...features.map((f) => `-D${f}=ON`)], { log: LOG });
  run("cmake", ["--build", build, "-j", String(cpus().length), "--target", "ggml-cpu"], { log: LOG });
  return { file: join(build, "bin", "libggml-cpu.so"), stamp: { release: bundledRelease(), patch: sha256(PATCH), features } };
}

/**
 * Installs a built backend into node-llama-cpp's prebuilt CPU folder, beside its own variants
 * (the patch ranks it above them where this CPU has its features).
 */
export function installCpuBackend(file: string, stamp: CpuBackendStamp, dir: string): void {
  copyFileSync(file, join(dir, `${CPU_BACKEND_FILE}.tmp`));
  renameSync(join(dir, `${CPU_BACKEND_FILE}.tmp`), join(dir, CPU_BACKEND_FILE));
  writeFileSync(join(dir, CPU_BACKEND_STAMP), JSON.stringify(stamp, null, 2));
}

/** Removes Kiln's backend, leaving node-llama-cpp's own variants. */
export function restoreCpuBackend(dir: string): void {
  rmSync(join(dir, CPU_BACKEND_FILE), { force: true });
  rmSync(join(dir, CPU_BACKEND_STAMP), { force: true });
}

/** llama.cpp's own reference programs, built from the unpatched release (the benchmark's baseline). */
export interface LlamaTools {
  bench: string;
  server: string;
}

/** Finds or builds `llama-bench` and `llama-server` (about 10 minutes on two cores the first time). */
export function buildTools(): LlamaTools {
  const src = source("llama.cpp");
  const build = join(src, "build");
  const tools = { bench: join(build, "bin", "llama-bench"), server: join(build, "bin", "llama-server") };
  if (existsSync(tools.bench) && existsSync(tools.server)) return tools;
  console.log(`build-llama: building llama-bench and llama-server from llama.cpp ${bundledRelease()} (about 10 minutes on two cores)…`);
  run("cmake", ["-S", src, "-B", build, ...COMMON_CMAKE], { log: LOG });
  run("cmake", ["--build", build, "-j", String(cpus().length), "--target", "llama-bench", "llama-server"], { log: LOG });
  return tools;
}

function main(): void {
  const args = process.argv.slice(2);
  if (args.includes("--tools")) {
    const tools = buildTools();
    console.log(`build-llama: ${tools.bench}\nbuild-llama: ${tools.server}`);
    return;
  }
  const dir = prebuiltCpuBinsDir();
  if (args.includes("--restore")) {
    if (dir) restoreCpuBackend(dir);
    console.log("build-llama: node-llama-cpp's own CPU backends restored");
    return;
  }
  if (process.env.KILN_SKIP_LLAMA_BUILD) return console.log("build-llama: skipped (KILN_SKIP_LLAMA_BUILD)");
  if (!dir || process.arch !== "x64") return console.log("build-llama: not Linux x86-64; node-llama-cpp's own CPU backend stays");
  const current = installedCpuBackend();
  const features = x86Features();
  if (!args.includes("--force") && current && current.release === bundledRelease() && current.patch === sha256(PATCH) && current.features.join() === features.join()) {
    return console.log("build-llama: the shared-threadpool CPU backend is already installed");
  }
  try {
    const started = Date.now();
    const { file, stamp } = buildCpuBackend();
    installCpuBackend(file, stamp, dir);
    console.log(`build-llama: installed the shared-threadpool CPU backend (${features.length} SIMD features) in ${Math.round((Date.now() - started) / 1000)} s`);
  } catch (err) {
    // The agent works without it (slower with more than one thread): never fail the install.
    console.warn(`build-llama: could not build the patched CPU backend (${err instanceof Error ? err.message : String(err)}); node-llama-cpp's own stays`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main();

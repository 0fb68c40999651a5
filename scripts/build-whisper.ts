/**
 * Builds Kiln's whisper addon (`native/whisper`: the binding and the vendored whisper.cpp) for every
 * prebuilt folder of node-llama-cpp installed here (CPU, and CUDA or Vulkan where installed), and
 * installs it there as `kiln-whisper.node`. Runs from `npm install` (the `prepare` step, after
 * `build-llama`, whose clone of the bundled llama.cpp release gives the ggml headers) and by hand:
 *
 *   node dist/scripts/build-whisper.js            # portable SIMD for whisper.cpp's own code: -mavx2 -mfma -mf16c where the CPU has them
 *   node dist/scripts/build-whisper.js --native   # -march=native (this CPU only; bench-asr builds whisper-cli the same way)
 *   node dist/scripts/build-whisper.js --force    # rebuild even when the stamps match
 *   node dist/scripts/build-whisper.js --cli [--cuda]   # whisper-cli from the same sources (bench-asr's baseline)
 *
 * whisper.cpp is compiled once (about a minute on two cores) and linked to each folder's own
 * `libggml` and `libggml-base`: the matrix work runs in the ggml backends node-llama-cpp ships
 * (CPU variants, Kiln's shared-threadpool CPU backend, CUDA, Vulkan), so no CUDA compiler is
 * needed, and whisper and the chat engine share one GPU runtime. Needs cmake, git and a C++
 * compiler. `KILN_SKIP_WHISPER_BUILD=1` skips it.
 */
import { copyFileSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { arch, cpus } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { cpuFlags } from "../core/cpu.js";
import { installedWhisperAddon, prebuiltBinsDir, PREBUILT_KINDS, WHISPER_ADDON_FILE, WHISPER_ADDON_STAMP, type PrebuiltKind, type WhisperAddonStamp } from "../core/prebuilt.js";
import { addonHeaders, buildTools, bundledRelease, CACHE_DIR, checkLoads, ggmlHeaders, ggmlSource, installBeside } from "./build-llama.js";
import { run } from "./lib/run.js";
import { sha256Tree } from "./lib/hash.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The addon's sources and the vendored whisper.cpp. */
export const WHISPER_SOURCE = join(ROOT, "native", "whisper");
const LOG = join(CACHE_DIR, "build-whisper.log");

/** x86-64 SIMD extensions the portable build uses, as /proc/cpuinfo names them. */
const X86_SIMD = ["avx2", "fma", "f16c"];

/** Compiler flags for whisper.cpp's own code: SIMD where this x86-64 CPU has it, else none beyond -O3. */
export function portableFlags(): string {
  if (arch() !== "x64") return "";
  const flags = cpuFlags();
  return X86_SIMD.every((f) => flags.has(f)) ? "-mavx2 -mfma -mf16c" : "";
}

/** The vendored whisper.cpp's version. */
export function whisperVersion(): string {
  return readFileSync(join(WHISPER_SOURCE, "whisper.cpp", "VERSION"), "utf8").trim();
}

/** The libraries an addon in prebuilt folder `dir` links: its libggml[.cuda|.vulkan].<release>.so and libggml-base.so. */
function ggmlLibraries(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /^libggml(-base|\.(cuda|vulkan))?(\.v[\w.-]+)?\.so$/.test(f))
    .map((f) => join(dir, f));
}

/**
 * Compiles the addon once and links it for each prebuilt folder in `dirs` (kind → folder); returns
 * the built file per kind, each checked to load with every symbol bound.
 */
export function buildWhisperAddons(dirs: ReadonlyMap<PrebuiltKind, string>, flags: string): Map<PrebuiltKind, string> {
  const { nodeInclude, napiInclude } = addonHeaders();
  const build = join(CACHE_DIR, "build-whisper");
  run(
    "cmake",
    [
      "-S",
      WHISPER_SOURCE,
      "-B",
      build,
      "-DCMAKE_BUILD_TYPE=Release",
      `-DGGML_INCLUDE=${ggmlHeaders()}`,
      `-DNODE_INCLUDE=${nodeInclude}`,
      `-DNAPI_INCLUDE=${napiInclude}`,
      `-DWHISPER_FLAGS=${flags}`,
      `-DKINDS=${[...dirs.keys()].join(";")}`,
      ...[...dirs].map(([kind, dir]) => `-DLINK_${kind}=${ggmlLibraries(dir).join(";")}`),
    ],
    { log: LOG },
  );
  run("cmake", ["--build", build, "-j", String(cpus().length)], { log: LOG });
  const built = new Map<PrebuiltKind, string>();
  for (const [kind, dir] of dirs) {
    const file = join(build, kind, WHISPER_ADDON_FILE);
    checkLoads(file, dir);
    built.set(kind, file);
  }
  return built;
}

/** The stamp a build from the current sources with `flags` would carry. */
export function wantedStamp(flags: string): WhisperAddonStamp {
  return { whisper: whisperVersion(), release: bundledRelease(), sources: sha256Tree(WHISPER_SOURCE), flags };
}

/** Builds and installs the addon for every installed folder whose stamp differs; returns the kinds built. */
export function buildWhisper(flags = portableFlags(), force = false): PrebuiltKind[] {
  const stamp = wantedStamp(flags);
  const stale = new Map<PrebuiltKind, string>();
  for (const kind of PREBUILT_KINDS) {
    const dir = prebuiltBinsDir(kind);
    if (dir && (force || JSON.stringify(installedWhisperAddon(kind)?.stamp) !== JSON.stringify(stamp))) stale.set(kind, dir);
  }
  if (stale.size === 0) return [];
  for (const [kind, file] of buildWhisperAddons(stale, flags)) installBeside(file, stale.get(kind)!, WHISPER_ADDON_FILE, WHISPER_ADDON_STAMP, stamp);
  return [...stale.keys()];
}

/**
 * Finds or builds whisper.cpp's `whisper-cli` from the same whisper.cpp and ggml sources (see
 * scripts/whisper-cli/CMakeLists.txt), for bench-asr. With `cuda`, ggml's backends are modules
 * loaded at run time (GGML_BACKEND_DL): whisper-cli and ggml's CPU module compile here, and the CUDA
 * module is the one llama.cpp's tools built from the same ggml (`buildTools({ cuda: true })`, built
 * first when missing; it needs nvcc), copied beside it: ggml's CUDA code, most of the build's time,
 * compiles once for both baselines. Returns its path.
 */
export function buildWhisperCli(options: { cuda?: boolean } = {}): string {
  const build = join(CACHE_DIR, options.cuda ? "whisper-cli-cuda" : "whisper-cli");
  const bin = join(build, "whisper-cli");
  const cudaModule = join(build, "libggml-cuda.so");
  if (existsSync(bin) && (!options.cuda || existsSync(cudaModule))) return bin;
  console.log(`build-whisper: building whisper-cli${options.cuda ? " with CUDA" : ""} from whisper.cpp ${whisperVersion()} and ggml of llama.cpp ${bundledRelease()}…`);
  // GGML_NATIVE cannot be used with backend modules: the CPU module is built for the x86-64 features ggml enables by default
  const modules = options.cuda ? ["-DGGML_BACKEND_DL=ON", "-DBUILD_SHARED_LIBS=ON", "-DGGML_NATIVE=OFF"] : [];
  run(
    "cmake",
    [
      "-S",
      join(ROOT, "scripts", "whisper-cli"),
      "-B",
      build,
      "-DCMAKE_BUILD_TYPE=Release",
      `-DWHISPER_SOURCE=${join(WHISPER_SOURCE, "whisper.cpp")}`,
      `-DGGML_SOURCE=${ggmlSource()}`,
      ...modules,
    ],
    { log: LOG },
  );
  run("cmake", ["--build", build, "-j", String(cpus().length), "--target", "whisper-cli", ...(options.cuda ? ["ggml-cpu"] : [])], { log: LOG });
  if (options.cuda) copyFileSync(buildTools({ cuda: true }).cudaBackend!, cudaModule);
  return bin;
}

function main(): void {
  if (process.env.KILN_SKIP_WHISPER_BUILD) {
    console.log("build-whisper: skipped (KILN_SKIP_WHISPER_BUILD)");
    return;
  }
  if (!prebuiltBinsDir("cpu")) throw new Error(`node-llama-cpp ships no prebuilt binaries for ${process.platform}-${process.arch}; Kiln's whisper addon links against them`);
  const args = process.argv.slice(2);
  if (args.includes("--cli")) return console.log(`build-whisper: ${buildWhisperCli({ cuda: args.includes("--cuda") })}`);
  const flags = args.includes("--native") ? "-march=native" : portableFlags();
  const started = Date.now();
  const built = buildWhisper(flags, args.includes("--force"));
  console.log(
    built.length
      ? `build-whisper: installed whisper.cpp ${whisperVersion()} for ${built.join(", ")} (flags: ${flags || "-O3"}) in ${Math.round((Date.now() - started) / 1000)} s`
      : "build-whisper: the whisper addon is already installed for every prebuilt folder",
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    main();
  } catch (err) {
    console.error(`build-whisper: ${err instanceof Error ? err.message : String(err)} (the compilers' output: ${LOG})`);
    process.exit(1);
  }
}

/**
 * Rebuilds smart-whisper's vendored whisper.cpp with the flags it should have had: the package
 * compiles with node-gyp and no SIMD flags, about 10× slower than it could run. Runs from
 * `npm install` (the `prepare` step) and by hand:
 *
 *   node dist/scripts/build-whisper.js            # portable SIMD: -O3 -mavx2 -mfma -mf16c on x86-64 (when the CPU has them)
 *   node dist/scripts/build-whisper.js --native   # -O3 -march=native (fastest, this CPU only; used by bench-asr)
 *   node dist/scripts/build-whisper.js --cuda     # BYOL: libwhisper.a built with CUDA from the same source, then linked
 *   node dist/scripts/build-whisper.js --force    # rebuild even when the last build used the same flags
 *
 * `KILN_SKIP_WHISPER_BUILD=1` skips it. A stamp in smart-whisper's build folder records the flags
 * and a hash of the addon's binding sources (which `patches/npm` patches), so repeated installs do
 * not rebuild, and a changed patch does.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { arch, cpus } from "node:os";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { cpuFlags } from "../agent/llm/cpu-backend.js";
import { run } from "./lib/run.js";
import { sha256Tree } from "./lib/hash.js";

const require = createRequire(import.meta.url);

export interface WhisperBuild {
  /** Compiler flags for C and C++. */
  flags: string;
  /** BYOL value (a prebuilt libwhisper and its link flags), when linking one. */
  byol?: string;
}

/** x86-64 SIMD extensions the portable build uses, as /proc/cpuinfo names them. */
const X86_SIMD = ["avx2", "fma", "f16c"];

/** The portable build for this machine: SIMD on x86-64 CPUs that have it, -O3 elsewhere. */
export function portableBuild(): WhisperBuild {
  if (arch() !== "x64") return { flags: "-O3" };
  const flags = cpuFlags();
  const missing = X86_SIMD.filter((f) => flags.size > 0 && !flags.has(f));
  return { flags: missing.length ? "-O3" : "-O3 -mavx2 -mfma -mf16c" };
}

function packageDir(): string {
  return dirname(require.resolve("smart-whisper/package.json"));
}

/**
 * Builds `libwhisper.a` with CUDA from smart-whisper's vendored whisper.cpp (its Makefile with
 * GGML_CUDA=1) and returns the BYOL link line. Needs nvcc and the CUDA libraries.
 */
export function cudaBuild(cudaHome = process.env.CUDA_HOME ?? "/usr/local/cuda"): WhisperBuild {
  const src = join(packageDir(), "whisper.cpp");
  const flagsMk = join(src, "scripts", "get-flags.mk");
  // The npm package leaves this Makefile include out; two lines are enough.
  if (!existsSync(flagsMk)) writeFileSync(flagsMk, "GF_CC := $(CC)\nGF_CXX := $(CXX)\n");
  run("make", ["-j", String(cpus().length), "libwhisper.a"], { cwd: src, env: { ...process.env, GGML_CUDA: "1", CUDA_PATH: cudaHome } });
  return {
    flags: "-O3",
    byol: `${join(src, "libwhisper.a")} -lcuda -lcublas -lculibos -lcudart -lcublasLt -lpthread -ldl -lrt -L${cudaHome}/lib64 -L${cudaHome}/lib64/stubs`,
  };
}

/** Rebuilds the addon with `build` unless the stamp says it already was. Returns whether it built. */
export function buildWhisper(build: WhisperBuild, force = false): boolean {
  const dir = packageDir();
  const stamp = join(dir, "build", "kiln-build.json");
  const addon = join(dir, "build", "Release", "smart-whisper.node");
  const wanted = JSON.stringify({ ...build, sources: sha256Tree(join(dir, "src", "binding")) }); // smart-whisper's binding, as patches/npm patches it
  if (!force && existsSync(addon) && existsSync(stamp) && readFileSync(stamp, "utf8") === wanted) return false;
  const env = { ...process.env, CFLAGS: build.flags, CXXFLAGS: build.flags, ...(build.byol ? { BYOL: build.byol } : {}) };
  run(process.platform === "win32" ? "npm.cmd" : "npm", ["rebuild", "smart-whisper", "--foreground-scripts", "--ignore-scripts=false"], { env });
  writeFileSync(stamp, wanted);
  return true;
}

function main(): void {
  if (process.env.KILN_SKIP_WHISPER_BUILD) {
    console.log("build-whisper: skipped (KILN_SKIP_WHISPER_BUILD)");
    return;
  }
  const args = process.argv.slice(2);
  const build = args.includes("--cuda") ? cudaBuild() : args.includes("--native") ? { flags: "-O3 -march=native" } : portableBuild();
  const built = buildWhisper(build, args.includes("--force"));
  console.log(built ? `build-whisper: smart-whisper rebuilt with ${JSON.stringify(build)}` : `build-whisper: smart-whisper already built with ${build.flags}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    main();
  } catch (err) {
    console.error(`build-whisper: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}

/**
 * Starting a native engine (whisper, sherpa-onnx) in a child process of its own, so that a crash
 * in native code (a segfault, an abort, the OOM killer) ends that process and not the agent.
 * The child gets a minimal environment (no secret of the agent's), no stdin, and writes its
 * stdout and stderr to the agent's stderr (the agent's stdout carries only its JSON log lines).
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { existingOr } from "../../../core/paths.js";

/** Variables an engine process may need: the loader's paths, locale, temp dir, home. */
const PASSED = ["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "UV_THREADPOOL_SIZE"];
/** Prefixes of the GPU runtimes' and compute libraries' settings (CUDA_VISIBLE_DEVICES, GGML_CUDA_…, OMP_NUM_THREADS). */
const PASSED_PREFIXES = ["CUDA_", "NVIDIA_", "GGML_", "OMP_", "OPENBLAS_", "MKL_"];

/** The environment of an engine process: the agent's variables that engines need, and `extra`. */
export function engineEnv(extra: Record<string, string> = {}, from: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(from)) {
    if (value !== undefined && (PASSED.includes(name) || PASSED_PREFIXES.some((p) => name.startsWith(p)))) env[name] = value;
  }
  return { ...env, ...extra };
}

/**
 * The compiled engine module `path` (relative to agent/asr); when this code runs from its
 * TypeScript sources (vitest), the module is taken from the build in dist/ (`npm test` builds first).
 */
export function engineModule(path: string): string {
  return fileURLToPath(existingOr(new URL(`../${path}`, import.meta.url), new URL(`../../../dist/agent/asr/${path}`, import.meta.url)));
}

/**
 * Forks the engine module `path` (relative to agent/asr) with an IPC channel using the
 * structured-clone serialization, so typed arrays pass whole. The caller listens for `close`
 * (all messages delivered, the process gone) and `error`.
 */
export function forkEngine(path: string, env: Record<string, string> = {}): ChildProcess {
  return fork(engineModule(path), [], {
    env: engineEnv(env),
    execArgv: [],
    serialization: "advanced",
    stdio: ["ignore", 2, 2, "ipc"],
  });
}

/** How a process ended, for messages: the signal's name, or its exit code. */
export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ?? `exit code ${code ?? "unknown"}`;
}

/**
 * Child processes Kiln starts to keep a fault away from the server: the engines an agent runs
 * (a native crash ends that process, not the agent) and the scheduler's MCP sandbox (a parser's
 * bug or a flood from a tenant's server ends that test, not the scheduler). A child gets a
 * minimal environment, never the server's secrets.
 */
import { fileURLToPath } from "node:url";
import { existingOr } from "./paths.js";

/** Variables a child may need: the loader's paths, locale, temp dir, home, the TLS trust store the operator set. */
const PASSED = [
  "PATH",
  "HOME",
  "TMPDIR",
  "LANG",
  "LC_ALL",
  "TZ",
  "LD_LIBRARY_PATH",
  "DYLD_LIBRARY_PATH",
  "UV_THREADPOOL_SIZE",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
];
/** Prefixes of the GPU runtimes' and compute libraries' settings (CUDA_VISIBLE_DEVICES, GGML_CUDA_…, OMP_NUM_THREADS). */
const PASSED_PREFIXES = ["CUDA_", "NVIDIA_", "GGML_", "OMP_", "OPENBLAS_", "MKL_"];

/** The environment of a child process: the server's variables that engines need, and `extra`. */
export function childEnv(extra: Record<string, string> = {}, from: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(from)) {
    if (value !== undefined && (PASSED.includes(name) || PASSED_PREFIXES.some((p) => name.startsWith(p)))) env[name] = value;
  }
  return { ...env, ...extra };
}

/**
 * The path of the compiled module `path` (relative to the project's root, `.js`), for a child
 * process to run. When this code runs from its TypeScript sources (vitest), it is the build in
 * dist/ (`npm test` builds first).
 */
export function compiledModule(path: string): string {
  // ../ of this file is the project's root (sources) or dist/ (compiled)
  return fileURLToPath(existingOr(new URL(`../${path}`, import.meta.url), new URL(`../dist/${path}`, import.meta.url)));
}

/** How a process ended, for messages: the signal's name, or its exit code. */
export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ?? `exit code ${code ?? "unknown"}`;
}

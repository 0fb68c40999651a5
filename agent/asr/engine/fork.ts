/**
 * Starting a native engine (whisper, sherpa-onnx) in a child process of its own, so that a crash
 * in native code (a segfault, an abort, the OOM killer) ends that process and not the agent.
 * The child gets a minimal environment (no secret of the agent's), no stdin, and writes its
 * stdout and stderr to the agent's stderr (the agent's stdout carries only its JSON log lines).
 */
import { fork, type ChildProcess } from "node:child_process";
import { childEnv, compiledModule } from "../../../core/child.js";

/**
 * Forks the engine module `path` (relative to agent/asr) with an IPC channel using the
 * structured-clone serialization, so typed arrays pass whole. The caller listens for `close`
 * (all messages delivered, the process gone) and `error`.
 */
export function forkEngine(path: string, env: Record<string, string> = {}): ChildProcess {
  return fork(compiledModule(`agent/asr/${path}`), [], {
    env: childEnv(env),
    execArgv: [],
    serialization: "advanced",
    stdio: ["ignore", 2, 2, "ipc"],
  });
}

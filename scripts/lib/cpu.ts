/** The host CPU as build scripts need it. */
import { spawnSync } from "node:child_process";
import { closeSync, openSync } from "node:fs";

export { cpuFlags } from "../../agent/llm/cpu-backend.js";

/**
 * Runs a command; throws naming the command when it fails. Its output goes to the terminal, or is
 * appended to `log` (a compiler's warnings have no place in `npm install`'s output).
 */
export function run(cmd: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; log?: string } = {}): void {
  const fd = options.log ? openSync(options.log, "a") : undefined;
  try {
    const res = spawnSync(cmd, args, { stdio: fd === undefined ? "inherit" : ["ignore", fd, fd], cwd: options.cwd, env: options.env ?? process.env });
    if (res.error) throw new Error(`${cmd}: ${res.error.message}`);
    if (res.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (exit ${res.status ?? res.signal})${options.log ? `; see ${options.log}` : ""}`);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

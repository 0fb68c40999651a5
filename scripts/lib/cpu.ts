/** The host CPU as build scripts need it. */
import { spawnSync } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";

/** The CPU's feature flags as /proc/cpuinfo names them (empty where there is no /proc). */
export function cpuFlags(): Set<string> {
  try {
    const line = readFileSync("/proc/cpuinfo", "utf8").split("\n").find((l) => l.startsWith("flags"));
    return new Set((line?.split(":")[1] ?? "").trim().split(/\s+/).filter(Boolean));
  } catch {
    return new Set();
  }
}

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

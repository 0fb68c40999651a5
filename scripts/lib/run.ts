/** Running other programs from the build and benchmark scripts. */
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { createServer, type AddressInfo } from "node:net";

/**
 * Runs a command; throws naming the command when it fails. Its output goes to the terminal, or is
 * appended to `log` (a compiler's warnings have no place in `npm install`'s output), whose folder is
 * made when missing (a build from `KILN_LLAMA_SOURCE` never clones into `.cache`, which made it before).
 */
export function run(cmd: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; log?: string } = {}): void {
  if (options.log) mkdirSync(dirname(options.log), { recursive: true });
  const fd = options.log ? openSync(options.log, "a") : undefined;
  try {
    const res = spawnSync(cmd, args, { stdio: fd === undefined ? "inherit" : ["ignore", fd, fd], cwd: options.cwd, env: options.env ?? process.env });
    if (res.error) throw new Error(`${cmd}: ${res.error.message}`);
    if (res.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (exit ${res.status ?? res.signal})${options.log ? `; see ${options.log}` : ""}`);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** A loopback port free right now, for a program that must be told its port (llama-server, PostgreSQL). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ok, fail) => server.once("error", fail).listen(0, "127.0.0.1", () => ok()));
  const { port } = server.address() as AddressInfo;
  await new Promise((ok) => server.close(ok));
  return port;
}

/** Issues an enterprise key (no quotas in the way of a benchmark) on `db` with `kiln keys create`; returns the key. */
export function kilnKey(db: string, account: string): string {
  const out = execFileSync(process.execPath, [resolve("bin/kiln.js"), "keys", "create", "--db", db, "--account", account, "--tier", "enterprise", "--rpm", "100000"], {
    encoding: "utf8",
  });
  const key = /key:\s+(\S+)/.exec(out.split("\n")[1] ?? "")?.[1];
  if (!key) throw new Error(`kiln keys create printed no key:\n${out}`);
  return key;
}

/** Resolves once `predicate` holds, polling every `everyMs`; rejects after `timeoutMs`. */
export async function until(predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = "condition", everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Starts a process; resolves once a line of its output matches `ready`. */
export function started(cmd: string, args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}): Promise<ChildProcess> {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  return new Promise((ok, fail) => {
    let seen = "";
    const look = (d: Buffer) => {
      seen = (seen + d.toString()).slice(-20_000);
      if (ready.test(seen)) ok(child);
    };
    child.stdout!.on("data", look);
    child.stderr!.on("data", look);
    child.once("exit", (code) => fail(new Error(`${cmd} exited (${code}) before it was ready:\n${seen.slice(-2000)}`)));
  });
}

export function stopped(child: ChildProcess): Promise<void> {
  return new Promise((ok) => {
    if (child.exitCode !== null) return ok();
    child.once("exit", () => ok());
    child.kill("SIGTERM");
  });
}

/**
 * CPU seconds (user and system) process `pid` has used, or only its main thread's with `mainThread`
 * (its event loop, for a Node process), from Linux's /proc (clock ticks taken as 1/100 s, Linux's
 * USER_HZ); undefined elsewhere. Beside requests or tokens per second, CPU per request or token is
 * what a server itself spends, which other work on a shared machine disturbs less.
 */
export function cpuSeconds(pid: number | undefined, mainThread = false): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, "utf8")
      .split(") ")[1]!
      .split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime and stime: fields 14 and 15 of stat
  } catch {
    return undefined;
  }
}

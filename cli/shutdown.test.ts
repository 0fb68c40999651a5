/** How a Kiln process ends on a fault nothing caught: in a child process running the built module. */
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const dist = (path: string) => pathToFileURL(resolve("dist", path)).href;

/** Runs `body` in a child with onShutdown installed (its close prints "drained"); returns its log lines and exit code. */
function runWithGuard(body: string): { lines: Record<string, unknown>[]; stdout: string; status: number | null } {
  const script = `
    import { onShutdown } from ${JSON.stringify(dist("cli/shutdown.js"))};
    import { withContext } from ${JSON.stringify(dist("core/context.js"))};
    import { createLogger } from ${JSON.stringify(dist("core/log.js"))};
    const logger = createLogger("test", "info");
    onShutdown(logger, async () => { process.stdout.write("drained\\n"); });
    ${body}`;
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000 });
  const lines = child.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { lines, stdout: child.stdout, status: child.status };
}

describe("onShutdown", () => {
  it("logs an unhandled rejection with the job it came from, drains, and exits 1", () => {
    const { lines, stdout, status } = runWithGuard(`withContext({ job: "job-42" }, () => setTimeout(() => { Promise.reject(new Error("boom")); }, 10));`);
    const fault = lines.find((l) => String(l.msg).startsWith("unhandled rejection"));
    expect(fault).toMatchObject({ level: 50, job: "job-42", msg: "unhandled rejection: draining and exiting (this is a bug in Kiln; please report it)" });
    expect((fault!.err as { message: string }).message).toBe("boom");
    expect(stdout).toMatch(/drained\n/);
    expect(status).toBe(1);
  });

  it("logs an uncaught exception with the job it came from, drains, and exits 1", () => {
    const { lines, stdout, status } = runWithGuard(`withContext({ job: "job-7" }, () => setTimeout(() => { throw new Error("thrown"); }, 10));`);
    expect(lines.find((l) => String(l.msg).startsWith("uncaught exception"))).toMatchObject({ level: 50, job: "job-7" });
    expect(stdout).toMatch(/drained\n/);
    expect(status).toBe(1);
  });

  it("drains and exits 0 on SIGTERM", () => {
    const { lines, stdout, status } = runWithGuard(`setTimeout(() => process.kill(process.pid, "SIGTERM"), 10); setTimeout(() => {}, 10_000);`);
    expect(lines.find((l) => l.msg === "shutting down")).toMatchObject({ signal: "SIGTERM" });
    expect(stdout).toMatch(/drained\n/);
    expect(status).toBe(0);
  });
});

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
    import { duringWork } from ${JSON.stringify(dist("core/context.js"))};
    /** A job that runs for a while and, meanwhile, does \`fault\`. */
    const job = (id, fault) => duringWork({ job: id }, () => new Promise((done) => setTimeout(() => { fault(); setTimeout(done, 1000); }, 10)));
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
  it("logs an unhandled rejection with the job running then, drains, and exits 1", () => {
    const { lines, stdout, status } = runWithGuard(`job("job-42", () => Promise.reject(new Error("boom")));`);
    const fault = lines.find((l) => String(l.msg).startsWith("unhandled rejection"));
    expect(fault).toMatchObject({ level: 50, job: "job-42", msg: "unhandled rejection: draining and exiting (this is a bug in Kiln; please report it)" });
    expect((fault!.err as { message: string }).message).toBe("boom");
    expect(stdout).toMatch(/drained\n/);
    expect(status).toBe(1);
  });

  it("logs an uncaught exception with the job running then, drains, and exits 1", () => {
    const { lines, stdout, status } = runWithGuard(`job("job-7", () => { throw new Error("thrown"); });`);
    expect(lines.find((l) => String(l.msg).startsWith("uncaught exception"))).toMatchObject({ level: 50, job: "job-7" });
    expect(stdout).toMatch(/drained\n/);
    expect(status).toBe(1);
  });

  it("names every job running when several run, and none once a job has ended", () => {
    const several = runWithGuard(`job("job-1", () => {}); job("job-2", () => Promise.reject(new Error("boom")));`);
    expect(several.lines.find((l) => String(l.msg).startsWith("unhandled rejection"))).toMatchObject({ running: [{ job: "job-1" }, { job: "job-2" }] });
    const ended = runWithGuard(`duringWork({ job: "job-9" }, async () => {}).then(() => setTimeout(() => Promise.reject(new Error("late")), 10));`);
    const fault = ended.lines.find((l) => String(l.msg).startsWith("unhandled rejection"))!;
    expect(fault).not.toHaveProperty("job");
    expect(fault).not.toHaveProperty("running");
  });

  it("drains and exits 0 on SIGTERM", () => {
    const { lines, stdout, status } = runWithGuard(`setTimeout(() => process.kill(process.pid, "SIGTERM"), 10); setTimeout(() => {}, 10_000);`);
    expect(lines.find((l) => l.msg === "shutting down")).toMatchObject({ signal: "SIGTERM" });
    expect(stdout).toMatch(/drained\n/);
    expect(status).toBe(0);
  });
});

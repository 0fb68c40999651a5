import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cpuSeconds, run } from "./run.js";

describe("run", () => {
  it("appends the command's output to a log whose folder does not exist yet (a build from KILN_LLAMA_SOURCE on a fresh GPU machine)", () => {
    const log = join(mkdtempSync(join(tmpdir(), "kiln-run-")), "not-yet", ".cache", "build.log");
    run("sh", ["-c", "echo compiled; echo warned >&2"], { log });
    expect(existsSync(log)).toBe(true);
    expect(readFileSync(log, "utf8")).toBe("compiled\nwarned\n");
  });

  it("names the command and the log when it fails", () => {
    const log = join(mkdtempSync(join(tmpdir(), "kiln-run-")), "b.log");
    expect(() => run("sh", ["-c", "exit 3"], { log })).toThrow(`sh -c exit 3 failed (exit 3); see ${log}`);
  });
});

describe.skipIf(!existsSync("/proc/self/stat"))("cpuSeconds", () => {
  it("counts the CPU a process and its main thread spend, and gives undefined for no process", () => {
    const [all, main] = [cpuSeconds(process.pid)!, cpuSeconds(process.pid, true)!];
    const start = process.cpuUsage();
    while (process.cpuUsage(start).user < 150_000) Math.sqrt(Math.random()); // 150 ms of this thread's CPU
    expect(cpuSeconds(process.pid, true)! - main).toBeGreaterThanOrEqual(0.1);
    expect(cpuSeconds(process.pid)! - all).toBeGreaterThanOrEqual(0.1);
    expect(cpuSeconds(undefined)).toBeUndefined();
  });
});

/**
 * The sandbox's own guarantees, whatever bug a client library has: faults are injected into the
 * sandbox process itself (`--import` of a data: module) while it tests a server that never
 * answers, and each ends that test with Kiln's error while this process carries on.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import net, { type AddressInfo } from "node:net";
import { getPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApiError } from "../../../core/errors.js";
import type { SandboxJob } from "./protocol.js";
import { stopSandboxes, testInSandbox, type SandboxSettings } from "./sandbox.js";

/** Whether a process of that id is alive (a zombie not yet reaped counts as gone only once reaped). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}

const MiB = 2 ** 20;

describe("an MCP test's sandbox", () => {
  let silent: net.Server;
  let port: number;
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "warn" },
    new Writable({
      write(line: Buffer, _e, done) {
        lines.push(JSON.parse(line.toString()) as Record<string, unknown>);
        done();
      },
    }),
  );

  beforeAll(async () => {
    silent = net.createServer((s) => s.on("error", () => undefined).resume()); // accepts, never answers
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
    port = (silent.address() as AddressInfo).port;
  });
  afterAll(() => void silent.close());

  /** Tests an MCP-over-HTTP server that never answers, with `fault` (module source) loaded into the sandbox first. */
  function run(
    fault: string,
    settings: Partial<SandboxSettings> = {},
    timeoutMs = 3000,
    url = `http://127.0.0.1:${port}/mcp`,
    running?: Set<ChildProcess>,
    job: Partial<SandboxJob> = {},
  ): Promise<unknown> {
    return testInSandbox(
      {
        server: { id: "mcp_1", account: "mallory", name: "x", server_type: "mcp", config: { transport: "http", url }, created_at: 0, updated_at: 0 } as never,
        account: "mallory",
        secrets: { OWN: "own-secret" },
        egress: { allow: ["127.0.0.1/32"] },
        stdioServers: {},
        timeoutMs,
        requestId: "req-1",
        ...job,
      },
      { memoryBytes: 160 * MiB, readBytes: 32 * MiB, execArgv: [`--import=data:text/javascript,${encodeURIComponent(fault)}`], ...settings },
      logger,
      running,
    ).then(
      (ok) => ok,
      (err: ApiError) => err,
    );
  }

  it("an exception thrown out of the event loop ends the test with 502 mcp_bad_answer naming the server, and is logged", async () => {
    // Thrown once the job is read (stdin ended), so the server's label is known however slow the start.
    const err = (await run(`process.stdin.once("end", () => setTimeout(() => { throw new RangeError("a parser's bug") }, 100))`)) as ApiError;
    expect(err).toMatchObject({ status: 502, code: "mcp_bad_answer" });
    expect(err.message).toMatch(/^server_id: mcp_1 \(mcp\) sent an answer its client could not read/);
    expect(lines.some((l) => l.requestId === "req-1" && JSON.stringify(l.err ?? "").includes("a parser's bug"))).toBe(true);
  });

  it("memory past the cap ends the test with 502 mcp_answer_too_large", async () => {
    const err = (await run(`const kept = []; setInterval(() => { for (let i = 0; i < 8; i++) kept.push(Buffer.alloc(1 << 20, 1)) }, 5)`)) as ApiError;
    expect(err).toMatchObject({ status: 502, code: "mcp_answer_too_large" });
    expect(err.message).toContain("160 MiB of memory");
  });

  it("bytes past the read limit, over all connections together, end the test with 502 mcp_answer_too_large", async () => {
    const flood = net.createServer((s) => {
      s.on("error", () => undefined);
      s.once("data", () => {
        s.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n");
        const pump = (): void => {
          while (!s.destroyed && s.write(`data: ${"x".repeat(64 * 1024)}\n\n`));
          if (!s.destroyed) s.once("drain", pump);
        };
        pump();
      });
    });
    await new Promise<void>((r) => flood.listen(0, "127.0.0.1", () => r()));
    try {
      const err = (await run("", { readBytes: 2 * MiB }, 3000, `http://127.0.0.1:${(flood.address() as AddressInfo).port}/mcp`)) as ApiError;
      expect(err).toMatchObject({ status: 502, code: "mcp_answer_too_large" });
      expect(err.message).toContain("more than 2 MiB");
    } finally {
      flood.close();
    }
  });

  it("a sandbox whose event loop never comes back is killed after the test's time and answers 502 mcp_timeout", async () => {
    const started = Date.now();
    const err = (await run(`setTimeout(() => { for (;;); }, 50)`, {}, 500)) as ApiError;
    expect(err).toMatchObject({ status: 502, code: "mcp_timeout" });
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("an outcome that is not one (a log line that is no object) is refused: 502 mcp_bad_answer, and this process goes on", async () => {
    const forged = JSON.stringify({ ok: false, error: { status: 502, type: "upstream_error", code: "x", message: "m" }, logs: [null] });
    const err = (await run(`const w = process.stdout.write.bind(process.stdout); process.stdout.write = (_chunk, done) => w(${JSON.stringify(forged)}, done);`)) as ApiError;
    expect(err).toMatchObject({ status: 502, code: "mcp_bad_answer" });
  });

  it("stopSandboxes kills the sandboxes still running: their tests end at once", async () => {
    const running = new Set<ChildProcess>();
    const started = Date.now();
    const test = run("", {}, 30_000, undefined, running);
    await until(() => running.size === 1);
    stopSandboxes(running);
    expect(await test).toMatchObject({ status: 502, code: "mcp_bad_answer" });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(running.size).toBe(0);
  });

  it("an operator's stdio server the sandbox started is ended with it when a breach stops the test", async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), "kiln-sandbox-")), "pid");
    const server = {
      command: process.execPath,
      args: ["-e", `require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`],
      env: {},
      tenant_env: [],
      memory_mb: 512,
      cpu_seconds: 60,
    };
    const err = (await run(
      `setTimeout(() => { const kept = []; setInterval(() => { for (let i = 0; i < 8; i++) kept.push(Buffer.alloc(1 << 20, 1)) }, 5) }, 1500)`,
      {},
      10_000,
      undefined,
      undefined,
      {
        server: { id: "mcp_2", account: "mallory", name: "s", server_type: "mcp", config: { transport: "stdio", server: "slow" }, created_at: 0, updated_at: 0 } as never,
        stdioServers: { slow: server },
      },
    )) as ApiError;
    expect(err).toMatchObject({ status: 502, code: "mcp_answer_too_large" });
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(pid).toBeGreaterThan(0);
    await until(() => !alive(pid));
  });

  it("a sandbox runs below the scheduler's priority (nice 10), so a burst of tests yields the CPU to honest requests", async () => {
    const err = (await run(`setTimeout(async () => { const os = await import("node:os"); throw new Error("nice:" + os.getPriority()) }, 1000)`)) as ApiError;
    expect(err.code).toBe("mcp_bad_answer");
    const seen = String((lines.findLast((l) => JSON.stringify(l.err ?? "").includes("nice:"))!.err as { message: string }).message);
    expect(Number(seen.replace("nice:", ""))).toBe(getPriority() + 10);
  });

  it("the sandbox sees none of the scheduler's environment", async () => {
    process.env.KILN_SANDBOX_TEST_OPERATOR_SECRET = "operator-only";
    try {
      const err = (await run(`setTimeout(() => { throw new Error("env:" + Object.keys(process.env).join(",")) }, 1000)`)) as ApiError;
      expect(err.code).toBe("mcp_bad_answer");
      const seen = String((lines.findLast((l) => JSON.stringify(l.err ?? "").includes("env:"))!.err as { message: string }).message);
      expect(seen).not.toContain("KILN_SANDBOX_TEST_OPERATOR_SECRET");
      expect(
        seen
          .replace("env:", "")
          .split(",")
          .every((name) =>
            /^(PATH|HOME|TMPDIR|LANG|LC_ALL|TZ|LD_LIBRARY_PATH|UV_THREADPOOL_SIZE|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|CUDA_.*|NVIDIA_.*|GGML_.*|OMP_.*|OPENBLAS_.*|MKL_.*)?$/.test(
              name,
            ),
          ),
      ).toBe(true);
    } finally {
      delete process.env.KILN_SANDBOX_TEST_OPERATOR_SECRET;
    }
  });
});

/**
 * Runs one MCP test in a process of its own: `node child.js` with its V8 heap capped, a minimal
 * environment (none of the scheduler's variables or secrets), its own process group, and the job
 * on stdin. The scheduler reads at most `MAX_OUTCOME_BYTES` of its stdout and kills the group
 * when the test's time (plus the start-up) is past. Whatever the tenant's server sends ends, at
 * worst, that process: the answer is then a 502 naming the server, and the scheduler goes on.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { getPriority, setPriority } from "node:os";
import { z } from "zod";
import { childEnv, compiledModule, describeExit } from "../../../core/child.js";
import { ApiError, ERROR_TYPES } from "../../../core/errors.js";
import type { Logger } from "../../../core/log.js";
import { MAX_OUTCOME_BYTES, type SandboxJob, type SandboxLimits, type SandboxOutcome } from "./protocol.js";
import { badAnswerError, serverLabel, timeoutError, type McpTestResult } from "../tester.js";
import { relayedCode } from "../../../core/error-codes.js";

/** What the scheduler sets for every sandbox. */
export interface SandboxSettings extends SandboxLimits {
  /** Extra `node` arguments for the child (`--import` of a test's socket witness). Default none. */
  execArgv?: string[];
}

/** How much nicer a sandbox process is than the scheduler, so a burst of tests does not slow honest requests. */
const SANDBOX_NICE = 10;
/** How long a sandbox may take to start (load Node, the MCP SDK and a client library) on top of the test's own time, in ms. */
const START_GRACE_MS = 5000;
/** The most of the child's stderr kept for the log (Node's own last words: a heap limit, a native abort). */
const STDERR_TAIL_CHARS = 2000;

/**
 * Runs `job` in a sandbox; resolves with the test's result or rejects with the `ApiError` for the
 * tenant. The process is in `running` while it lives (its owner kills what is left at shutdown: `stopSandboxes`).
 */
export function testInSandbox(job: Omit<SandboxJob, "limits">, settings: SandboxSettings, logger: Logger, running?: Set<ChildProcess>): Promise<McpTestResult> {
  const what = serverLabel(job.server);
  const heapMb = Math.max(32, Math.floor((settings.memoryBytes * 0.75) / 2 ** 20));
  const child = spawn(process.execPath, [...(settings.execArgv ?? []), `--max-old-space-size=${heapMb}`, compiledModule("scheduler/mcp/sandbox/child.js")], {
    env: childEnv(),
    stdio: ["pipe", "pipe", "pipe"],
    detached: true, // a group of its own, killed whole
  });
  running?.add(child);
  lowerPriority(child.pid);
  const full: SandboxJob = { ...job, limits: { memoryBytes: settings.memoryBytes, readBytes: settings.readBytes } };
  return new Promise<McpTestResult>((resolve, reject) => {
    const out: Buffer[] = [];
    let outBytes = 0;
    let stderr = "";
    let stopped: "timeout" | "outcome too large" | undefined;
    const kill = (why: typeof stopped): void => {
      stopped ??= why;
      killGroup(child);
    };
    const timer = setTimeout(() => kill("timeout"), job.timeoutMs + START_GRACE_MS);
    child.stdin.on("error", () => undefined); // a child that died before reading its job
    child.stdin.end(JSON.stringify(full));
    child.stdout.on("data", (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > MAX_OUTCOME_BYTES) return kill("outcome too large");
      out.push(chunk);
    });
    child.stderr.setEncoding("utf8").on("data", (text: string) => {
      stderr = (stderr + text).slice(-STDERR_TAIL_CHARS);
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      logger.error({ requestId: job.requestId, err: { name: err.name, message: err.message } }, "MCP sandbox could not start");
      reject(new ApiError(500, "server_error", "mcp_sandbox_failed", "the MCP test could not be run; the scheduler's log says why"));
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      running?.delete(child);
      const outcome = stopped ? undefined : parseOutcome(Buffer.concat(out));
      for (const { level: _level, msg, ...fields } of outcome?.logs ?? [])
        logger.warn({ ...fields, requestId: job.requestId, account: job.account, sandbox: child.pid }, typeof msg === "string" ? msg : "MCP sandbox");
      if (outcome?.ok) return resolve(outcome.result);
      if (outcome) return reject(new ApiError(outcome.error.status, outcome.error.type, relayedCode(outcome.error.code), outcome.error.message));
      if (stopped === "timeout") return reject(timeoutError(what, job.timeoutMs));
      logger.warn({ requestId: job.requestId, account: job.account, exit: describeExit(code, signal), stopped, stderr: stderr.trim() }, "MCP sandbox ended without an outcome");
      reject(badAnswerError(what));
    });
  });
}

/** A sandbox yields the CPU to the scheduler and its honest traffic (10 nicer than the scheduler). */
function lowerPriority(pid: number | undefined): void {
  try {
    if (pid !== undefined) setPriority(pid, Math.min(19, getPriority() + SANDBOX_NICE));
  } catch {
    /* gone already, or not permitted: it runs at the scheduler's priority */
  }
}

/** Kills what is left of a sandbox: its whole process group. */
function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, "SIGKILL");
  } catch {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL"); // not a group leader yet
  }
}

/** Kills every sandbox in `running` (the scheduler is stopping). */
export function stopSandboxes(running: Set<ChildProcess>): void {
  for (const child of running) killGroup(child);
  running.clear();
}

const text = z.string().max(64 * 1024);
/** What a sandbox may answer: checked whole, since it comes from the process that met the tenant's bytes. */
const Outcome = z.discriminatedUnion("ok", [
  z.object({
    ok: z.literal(true),
    result: z.object({
      server_id: text,
      status: z.literal("ok"),
      resources: z.array(z.object({ uri: text, name: text, description: text.optional(), mimeType: text.optional() })),
      tools: z.array(z.object({ name: text, description: text.optional(), inputSchema: z.unknown() })),
      latency_ms: z.number(),
    }),
    logs: z.array(z.record(z.string(), z.unknown())).max(100),
  }),
  z.object({
    ok: z.literal(false),
    error: z.object({
      status: z.number().int().min(400).max(599),
      type: z.enum(ERROR_TYPES),
      code: z.string().regex(/^[a-z_]{1,64}$/),
      message: text,
    }),
    logs: z.array(z.record(z.string(), z.unknown())).max(100),
  }),
]);

/** The outcome the child wrote, or undefined when what it wrote is not one. */
function parseOutcome(bytes: Buffer): SandboxOutcome | undefined {
  try {
    const parsed = Outcome.safeParse(JSON.parse(bytes.toString("utf8")));
    if (parsed.success) return parsed.data as SandboxOutcome;
  } catch {
    /* a partial write: the process died mid-way */
  }
  return undefined;
}

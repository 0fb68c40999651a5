/**
 * The process an MCP test runs in (`node child.js`, started by `testInSandbox`). It reads the job
 * from stdin, runs the test with its own egress guard and the secrets it was handed, writes one
 * outcome to stdout and exits: whatever the tenant's server sent, however a client library
 * failed on it (an exception thrown out of a socket's listener, a flood, a hang), what ends is
 * this process, never the scheduler.
 */
import { Writable } from "node:stream";
import { pino } from "pino";
import { ApiError, UpstreamError } from "../../../core/errors.js";
import { EgressPolicy } from "../egress.js";
import { MissingSecretError } from "../secrets.js";
import { endStdioServers } from "../stdio.js";
import { badAnswerError, serverLabel, testMcpServer, tooLargeError } from "../tester.js";
import { holdTo } from "./caps.js";
import type { SandboxJob, SandboxLog, SandboxOutcome } from "./protocol.js";

/** The most of a job read from stdin, in bytes. */
const MAX_JOB_BYTES = 8 * 1024 * 1024;
/** Log lines kept for the scheduler, and the most characters of each. */
const MAX_LOGS = 20;
const MAX_LOG_CHARS = 4096;

const logs: SandboxLog[] = [];
let finished = false;

/** Writes the outcome and ends the process: its sockets and timers, and an operator's stdio server it started (a process group of its own). */
function finish(outcome: SandboxOutcome): void {
  if (finished) return;
  finished = true;
  endStdioServers();
  process.stdout.write(JSON.stringify(outcome), () => process.exit(0));
}

function failure(err: ApiError): SandboxOutcome {
  return { ok: false, error: { status: err.status, type: err.type, code: err.code, message: err.message }, logs };
}

async function readJob(): Promise<SandboxJob> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_JOB_BYTES) throw new Error(`the job is over ${MAX_JOB_BYTES} bytes`);
    parts.push(chunk);
  }
  return JSON.parse(Buffer.concat(parts).toString("utf8")) as SandboxJob;
}

/** The server under test, as messages name it (set once the job is read). */
let what = "the MCP server";

/** A throw no one caught (a client library's parser on bytes it never expected): the test ends, and says so. */
function broken(err: unknown): void {
  logs.push({ err: describe(err), msg: "MCP test: the server's answer broke its client" });
  finish(failure(badAnswerError(what)));
}
process.on("uncaughtException", broken);
process.on("unhandledRejection", broken);

async function main(): Promise<void> {
  const job = await readJob();
  what = serverLabel(job.server);
  holdTo(job.limits, (breach) => finish(failure(tooLargeError(what, breach.limit, breach.kind === "read" ? "sent" : "memory"))));
  const logger = pino(
    { level: "warn", base: null, timestamp: false },
    new Writable({
      write(line: Buffer, _encoding, done) {
        if (logs.length < MAX_LOGS) logs.push(logLine(line.toString("utf8")));
        done();
      },
    }),
  );
  const secrets = job.secrets;
  try {
    const result = await testMcpServer(job.server, {
      account: job.account,
      secret: (name) => {
        if (!name || !Object.hasOwn(secrets, name)) throw new MissingSecretError(name ?? "(none named)");
        return secrets[name]!;
      },
      egress: new EgressPolicy(job.egress),
      stdioServers: job.stdioServers,
      timeoutMs: job.timeoutMs,
      logger,
      ...(job.fsBase ? { fsBase: job.fsBase } : {}),
      ...(job.requestId ? { requestId: job.requestId } : {}),
    });
    finish({ ok: true, result, logs });
  } catch (err) {
    finish(failure(err instanceof ApiError ? err : new UpstreamError("mcp_unreachable", `${what} is unreachable or failed the MCP handshake`)));
  }
}

/** One of pino's lines, as an object for the scheduler to log: whole when short, else its message and a cut of it. */
function logLine(text: string): SandboxLog {
  if (text.length <= MAX_LOG_CHARS) {
    try {
      return JSON.parse(text) as SandboxLog;
    } catch {
      /* not JSON after all: kept as text below */
    }
  }
  return { msg: "MCP test (log line cut)", line: text.slice(0, MAX_LOG_CHARS) };
}

function describe(err: unknown): { name: string; message: string } | string {
  return err instanceof Error ? { name: err.name, message: err.message.slice(0, 1000) } : String(err).slice(0, 1000);
}

main().catch((err: unknown) => {
  logs.push({ err: describe(err), msg: "MCP sandbox: the job could not be run" });
  finish({ ok: false, error: { status: 500, type: "server_error", code: "mcp_sandbox_failed", message: "the MCP test could not be run; the scheduler's log says why" }, logs });
});

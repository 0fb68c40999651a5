/**
 * An operator's stdio MCP server (from `--mcp-stdio-servers`) as an MCP client transport. The
 * process starts
 * - with an empty environment plus the variables its catalog entry fixes and the ones the
 *   tenant fills from its own secrets (`env_from`, limited to the entry's `tenant_env`);
 * - in a scratch folder of its own (mode 0700), removed afterwards;
 * - under `prlimit` data-segment and CPU-time limits;
 * - in a process group of its own, killed whole (SIGKILL) when the transport closes.
 * Messages are framed with the SDK's own stdio reader and writer.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { StdioServerSpec } from "../../config/index.js";

/** util-linux's prlimit: sets the limits, then executes the server in its place. */
const PRLIMIT = "prlimit";

/** The servers running in this process: their process group ids and scratch folders. */
const live = new Map<number, string>();

/**
 * Ends every stdio server this process started, at once and synchronously: for a process about to
 * exit without closing its transports (an MCP test's sandbox stopped by a breach or a fault).
 */
export function endStdioServers(): void {
  for (const [group, scratch] of live) {
    try {
      process.kill(-group, "SIGKILL");
    } catch {
      /* already gone */
    }
    rmSync(scratch, { recursive: true, force: true });
  }
  live.clear();
}

export class OperatorStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private child: ChildProcess | undefined;
  private scratch: string | undefined;
  private readonly reader = new ReadBuffer({ maxBufferSize: 4 * 1024 * 1024 });
  private closed = false;

  /** @param env the tenant's variables, already resolved from its secrets and checked against `tenant_env`. */
  constructor(
    private readonly spec: StdioServerSpec,
    private readonly env: Record<string, string>,
  ) {}

  /** The server's process id while it runs (its process group has the same id). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    this.scratch = await mkdtemp(join(tmpdir(), "kiln-mcp-"));
    if (this.closed) return this.cleanup(); // closed while the folder was being made
    const { spec } = this;
    const limits = [`--data=${spec.memory_mb * 1024 * 1024}`, `--cpu=${spec.cpu_seconds}`, "--"];
    const child = spawn(PRLIMIT, [...limits, spec.command, ...spec.args], {
      env: { ...spec.env, ...this.env, HOME: this.scratch, TMPDIR: this.scratch },
      cwd: this.scratch,
      stdio: ["pipe", "pipe", "ignore"],
      detached: true, // its own process group, killed whole
      shell: false,
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
    live.set(child.pid!, this.scratch);
    child.on("error", (err) => this.onerror?.(err));
    child.once("exit", () => void this.close());
    child.stdin!.on("error", (err) => this.onerror?.(err));
    child.stdout!.on("data", (chunk: Buffer) => {
      try {
        this.reader.append(chunk);
        for (let m = this.reader.readMessage(); m; m = this.reader.readMessage()) this.onmessage?.(m);
      } catch (err) {
        this.onerror?.(err as Error);
        void this.close();
      }
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.closed) throw new Error("the MCP server is not running");
    await new Promise<void>((resolve, reject) => stdin.write(serializeMessage(message), (err) => (err ? reject(err) : resolve())));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const child = this.child;
    if (child?.pid !== undefined) {
      live.delete(child.pid);
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        /* already gone */
      }
      if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once("exit", r));
    }
    this.reader.clear();
    await this.cleanup();
    this.onclose?.();
  }

  private async cleanup(): Promise<void> {
    if (this.scratch) await rm(this.scratch, { recursive: true, force: true }).catch(() => undefined);
  }
}

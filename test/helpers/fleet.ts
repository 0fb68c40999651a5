/**
 * Starts real schedulers and agents for tests: in this process (real gRPC and HTTP sockets on
 * loopback ports the OS picks) or as `kiln` child processes (for kill and restart scenarios).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { parseAgentConfig, parseSchedulerConfig, formatHostPort } from "../../config/index.js";
import { createLogger } from "../../core/log.js";
import { startAgent, type AgentHandle } from "../../agent/index.js";
import { startScheduler, type SchedulerExtras, type SchedulerHandle } from "../../scheduler/index.js";
import { defaultModelDir, TEST_MODELS } from "../../fabricate/index.js";
import { NODE_TOKEN, PROCESS_LOG_DIR } from "./secrets.js";
import { dbSettings, testDb } from "./db.js";
import { tempDir } from "./temp.js";
import { until } from "../../scripts/lib/run.js";

export { NODE_TOKEN } from "./secrets.js";
export const TINY_MODEL = join(defaultModelDir(), TEST_MODELS.tiny.file);
export const MODEL_ID = "famB-v3.1";

export { tempDir } from "./temp.js";

/** An operator's catalog file (`--catalog`) holding `models`, in a temporary folder. */
export function catalogFile(models: object[]): string {
  const file = join(tempDir(), "catalog.json");
  writeFileSync(file, JSON.stringify({ models }));
  return file;
}

const quiet = () => createLogger("test", (process.env.KILN_TEST_LOG_LEVEL as "info" | undefined) ?? "silent");

/** A scheduler in this process on its own new database (`testDb`), unless `raw` names one. */
export async function inProcessScheduler(raw: Record<string, string> = {}, extras: SchedulerExtras = {}): Promise<SchedulerHandle> {
  const db = raw.db ?? testDb();
  return startScheduler(
    parseSchedulerConfig({
      http: "127.0.0.1:0",
      grpc: "127.0.0.1:0",
      nodeTokens: NODE_TOKEN,
      heartbeatMs: "500",
      ...dbSettings(db),
      ...raw,
      db,
    }),
    quiet(),
    extras,
  );
}

export async function inProcessAgent(scheduler: { grpc: { host: string; port: number } }, raw: Record<string, string | string[]> = {}): Promise<AgentHandle> {
  const agent = await startAgent(
    parseAgentConfig({
      scheduler: formatHostPort(scheduler.grpc),
      nodeToken: NODE_TOKEN,
      serve: [`${MODEL_ID}=${TINY_MODEL}`],
      sequences: "4",
      contextSize: "2048",
      threads: "1",
      gpu: "cpu",
      host: "127.0.0.1",
      port: "0",
      dataDir: tempDir(),
      // no test reaches the internet: an agent fetches models only from a test's own hub
      offline: "true",
      ...raw,
    }),
    quiet(),
  );
  return agent;
}

export { until };

export async function waitForAgents(scheduler: SchedulerHandle, count: number): Promise<void> {
  await until(() => scheduler.fleet.snapshot().length === count, 15_000, `${count} agent(s) to join`);
}

/** A `kiln` child process whose JSON log lines can be awaited (and are kept for the secret scan). */
export class KilnProcess {
  readonly lines: string[] = [];
  private readonly waiters: { test: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    mkdirSync(PROCESS_LOG_DIR, { recursive: true });
    const log = join(PROCESS_LOG_DIR, `${process.pid}-${child.pid}.log`);
    const onLine = (line: string): void => {
      this.lines.push(line);
      appendFileSync(log, `${line}\n`);
      for (const w of [...this.waiters])
        if (w.test(line)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(line);
        }
    };
    createInterface({ input: child.stdout! }).on("line", onLine);
    createInterface({ input: child.stderr! }).on("line", onLine);
    this.exited = new Promise((r) => child.once("exit", (code) => r(code)));
  }

  /** Waits for a line matching `pattern` (seen already or still to come). */
  waitFor(pattern: RegExp, timeoutMs = 20_000): Promise<string> {
    const seen = this.lines.find((l) => pattern.test(l));
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern} in:\n${this.lines.slice(-20).join("\n")}`)), timeoutMs);
      this.waiters.push({
        test: (l) => pattern.test(l),
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
    });
  }

  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    await this.exited;
  }
}

export function spawnKiln(args: string[], env: Record<string, string> = {}): KilnProcess {
  const db = args[args.indexOf("--db") + 1];
  const secretsKey = args.includes("--db") && db ? dbSettings(db).secretsKey : undefined;
  const child = spawn(process.execPath, [resolve("bin/kiln.js"), ...args], {
    // Every spawned agent gets its own transcription port and data folder.
    env: {
      ...process.env,
      KILN_LOG_LEVEL: "info",
      KILN_HOST: "127.0.0.1",
      KILN_PORT: "0",
      KILN_DATA_DIR: tempDir(),
      // no test reaches the internet: an agent fetches models only from a test's own hub
      KILN_OFFLINE: "1",
      ...(secretsKey ? { KILN_SECRETS_KEY: secretsKey } : {}),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return new KilnProcess(child);
}

/**
 * Starts `kiln dev` on OS-picked ports, its own SQLite file, one CPU thread, with `extra` arguments;
 * resolves once its agent has joined, with its API base and the dev key it printed.
 */
export async function startDev(extra: string[] = [], env: Record<string, string> = {}): Promise<{ proc: KilnProcess; base: string; key: string }> {
  const proc = spawnKiln(["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--db", join(tempDir(), "kiln.db"), "--threads", "1", "--gpu", "cpu", ...extra], env);
  const base = (await proc.waitFor(/API base:/, 30_000)).split("API base:")[1]!.trim();
  const key = (await proc.waitFor(/Dev key:/)).split("Dev key:")[1]!.trim();
  await proc.waitFor(/agent joined/);
  return { proc, base, key };
}

/** Starts `kiln scheduler` on OS-picked ports (or the given ones); returns its bound addresses. */
export async function spawnScheduler(db: string, ports: { http?: number; grpc?: number } = {}, extra: string[] = []): Promise<{ proc: KilnProcess; http: number; grpc: number }> {
  const proc = spawnKiln(["scheduler", "--http", `127.0.0.1:${ports.http ?? 0}`, "--grpc", `127.0.0.1:${ports.grpc ?? 0}`, "--db", db, "--heartbeat-ms", "500", ...extra], {
    KILN_NODE_TOKENS: NODE_TOKEN,
  });
  const line = JSON.parse(await proc.waitFor(/scheduler listening/)) as { http: string; grpc: string };
  return { proc, http: Number(line.http.split(":").pop()), grpc: Number(line.grpc.split(":").pop()) };
}

export function spawnAgent(grpcPort: number, nodeId: string, extra: string[] = []): KilnProcess {
  return spawnKiln(
    [
      "agent",
      "--scheduler",
      `127.0.0.1:${grpcPort}`,
      "--node-id",
      nodeId,
      "--serve",
      `${MODEL_ID}=${TINY_MODEL}`,
      "--threads",
      "1",
      "--gpu",
      "cpu",
      "--context-size",
      "2048",
      ...extra,
    ],
    { KILN_NODE_TOKEN: NODE_TOKEN },
  );
}

/** POSTs a chat completion with a key; returns status, headers and parsed body. */
export async function postChat(base: string, key: string, body: unknown, init: RequestInit = {}): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* SSE or plain */
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

export const httpBase = (s: { http: { host: string; port: number } }): string => `http://${formatHostPort(s.http)}`;

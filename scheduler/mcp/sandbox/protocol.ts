/**
 * What the scheduler and an MCP test's sandbox process say to each other: the job, written whole
 * to the child's stdin, and the outcome, written whole to its stdout before it exits.
 */
import type { StdioCatalog } from "../../../config/index.js";
import type { ErrorCode } from "../../../core/error-codes.js";
import type { ErrorType } from "../../../core/errors.js";
import type { EgressPolicyOptions } from "../egress.js";
import type { StoredMcpServer } from "../store.js";
import type { McpTestResult } from "../tester.js";

/** What one sandbox may take. */
export interface SandboxLimits {
  /** Resident memory the process may reach before it is stopped, in bytes (its V8 heap is capped below it). */
  memoryBytes: number;
  /** Bytes it may read from all its sockets together. */
  readBytes: number;
}

export interface SandboxJob {
  server: StoredMcpServer;
  account: string;
  /** The values of the account's secrets the configuration names (only those). */
  secrets: Record<string, string>;
  /** The egress guard's settings, for the child's own guard. */
  egress: Pick<EgressPolicyOptions, "allow" | "resolveTimeoutMs" | "ownAddresses">;
  stdioServers: StdioCatalog;
  fsBase?: string;
  timeoutMs: number;
  requestId?: string;
  limits: SandboxLimits;
}

/** A log line the child asks the scheduler to write (the child has no log of its own). */
export type SandboxLog = Record<string, unknown> & { msg?: string };

export type SandboxOutcome =
  { ok: true; result: McpTestResult; logs: SandboxLog[] } | { ok: false; error: { status: number; type: ErrorType; code: ErrorCode; message: string }; logs: SandboxLog[] };

/** The most an outcome may be, in bytes (a result lists at most a few thousand tools and resources). */
export const MAX_OUTCOME_BYTES = 4 * 1024 * 1024;

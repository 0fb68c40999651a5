/**
 * Secrets the suites use, and where spawned processes' output is kept, so that the end of the
 * run can check that no log line of any process carries one (global-setup.ts).
 */
import { resolve } from "node:path";

export const NODE_TOKEN = "test-node-token-0123456789";
/** The password in the PostgreSQL URLs the suites pass (the throwaway server trusts loopback and ignores it). */
export const PG_PASSWORD = "pg-test-password-0123";
/** The MCP secrets key of schedulers on a shared PostgreSQL database (32 bytes, hex). */
export const SECRETS_KEY = "7e".repeat(32);
export const PROCESS_LOG_DIR = resolve("test-artifacts", "process-logs");

/** Literal secrets passed to processes in the suites, and the shape of any API key (a JWT). */
export const SECRET_LITERALS = [
  NODE_TOKEN,
  "definitely-not-a-known-token",
  "s3cret-token",
  "ui-secret-token",
  "file-secret-token-0123456789",
  "agent-secret",
  "dashboard-admin-token-0123",
  PG_PASSWORD,
  SECRETS_KEY,
];
export const JWT = /eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}/;

/** The JSON log lines (not banners meant for the operator) of `text` that leak a secret. */
export function leakedLines(text: string): string[] {
  return text.split("\n").filter((l) => l.startsWith("{") && (JWT.test(l) || SECRET_LITERALS.some((s) => l.includes(s))));
}

/**
 * Structured logs: one JSON line per event on stdout (pino). Secrets never go into a log call;
 * the redaction list is a second line of defence for fields that might carry one by mistake.
 */
import { pino, type Logger, type LevelWithSilent } from "pino";

export type { Logger };

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const satisfies readonly LevelWithSilent[];
export type LogLevel = (typeof LOG_LEVELS)[number];

const REDACT = [
  "authorization",
  "*.authorization",
  "headers.authorization",
  "token",
  "*.token",
  "apiKey",
  "*.apiKey",
  "secret",
  "*.secret",
  "jwtSecret",
  "*.jwtSecret",
  "nodeToken",
  "*.nodeToken",
  "nodeTokens",
  "*.nodeTokens",
];

/** A root logger; `component` becomes the `name` of every line. */
export function createLogger(component: string, level: LogLevel = "info"): Logger {
  return pino({ name: component, level, redact: { paths: REDACT, censor: "[redacted]" }, base: { pid: process.pid } });
}

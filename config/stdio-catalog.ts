/**
 * The operator's catalog of stdio MCP servers (`--mcp-stdio-servers FILE`): the only programs the
 * scheduler ever starts for a tenant. A tenant's `mcp` configuration picks one by name; it cannot
 * name a command, arguments or a folder of its own.
 *
 * ```json
 * { "github": { "command": "/usr/bin/node", "args": ["/opt/mcp/github/index.js"],
 *               "env": { "NODE_ENV": "production" }, "tenant_env": ["GITHUB_TOKEN"], "memory_mb": 512 } }
 * ```
 */
import { z } from "zod";
import { loadJsonFile } from "./json-file.js";

const name = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "server names are 1–64 letters, digits, _ or -");
const variable = z.string().regex(/^[A-Z_][A-Z0-9_]{0,127}$/, "must name an environment variable (A-Z, 0-9, _)");

export const STDIO_SERVER = z.strictObject({
  /** The program, as an absolute path (no PATH search in an empty environment). */
  command: z.string().startsWith("/", "must be an absolute path"),
  /** Its arguments. Default none. */
  args: z.array(z.string()).default([]),
  /** Variables the operator fixes for it (the server gets nothing else of the scheduler's environment). Default none. */
  env: z.record(variable, z.string()).default({}),
  /** Variables a tenant may fill from its own secrets through `env_from`. Default none. */
  tenant_env: z.array(variable).default([]),
  /** Data-segment limit of the process (RLIMIT_DATA), in MiB. Default 512. */
  memory_mb: z.number().int().min(16).max(65_536).default(512),
  /** CPU-time limit of the process (RLIMIT_CPU), in seconds. Default 60. */
  cpu_seconds: z.number().int().min(1).max(86_400).default(60),
});

export type StdioServerSpec = z.output<typeof STDIO_SERVER>;
export type StdioCatalog = Record<string, StdioServerSpec>;

const CATALOG = z.record(name, STDIO_SERVER);

/** Reads and validates a catalog file; throws an Error whose message names the file and the member. */
export function loadStdioCatalog(file: string): StdioCatalog {
  return loadJsonFile(file, CATALOG);
}

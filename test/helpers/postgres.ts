/**
 * A throwaway PostgreSQL server for the MCP suite: Debian's binaries (`.ci/run` installs the
 * package), a fresh cluster in a temporary folder with trust auth on 127.0.0.1, an OS-picked port.
 * Run as the `postgres` user when the tests run as root (PostgreSQL refuses root).
 */
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, readdirSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { tempDir } from "./fleet.js";

export function postgresBin(): string | undefined {
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const version = readdirSync(base).sort((a, b) => Number(b) - Number(a)).find((v) => existsSync(join(base, v, "bin", "initdb")));
  return version ? join(base, version, "bin") : undefined;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

export interface Postgres {
  port: number;
  /** Runs SQL as the superuser `postgres` in database `app`. */
  sql(statement: string): string;
  stop(): void;
}

export async function startPostgres(bin: string): Promise<Postgres> {
  const dir = tempDir();
  chmodSync(dir, 0o777);
  const data = join(dir, "data");
  const asRoot = process.getuid?.() === 0;
  const run = (cmd: string, args: string[]) => execFileSync(asRoot ? "runuser" : join(bin, cmd), asRoot ? ["-u", "postgres", "--", join(bin, cmd), ...args] : args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]);
  const port = await freePort();
  run("pg_ctl", ["-D", data, "-l", join(dir, "log"), "-w", "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, "start"]);
  const psql = (db: string, statement: string) => execFileSync(join(bin, "psql"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", db, "-v", "ON_ERROR_STOP=1", "-qAtc", statement], { encoding: "utf8" });
  psql("postgres", "CREATE DATABASE app");
  return {
    port,
    sql: (statement) => psql("app", statement),
    stop: () => { try { run("pg_ctl", ["-D", data, "-m", "immediate", "stop"]); } catch { /* already gone */ } },
  };
}

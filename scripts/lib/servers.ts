/**
 * Throwaway database servers (PostgreSQL, MariaDB, Redis) on free loopback ports, from Debian's
 * binaries (`.ci/run` installs the packages): for the suites and the benchmarks (`npm run bench:gateway`).
 * PostgreSQL: a fresh cluster in a temporary folder with trust auth on 127.0.0.1, run as the
 * `postgres` user when this runs as root (PostgreSQL refuses root).
 */
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./run.js";

const tempDir = (): string => mkdtempSync(join(tmpdir(), "kiln-server-"));

export function postgresBin(): string | undefined {
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const version = readdirSync(base)
    .sort((a, b) => Number(b) - Number(a))
    .find((v) => existsSync(join(base, v, "bin", "initdb")));
  return version ? join(base, version, "bin") : undefined;
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
  const run = (cmd: string, args: string[]) =>
    execFileSync(asRoot ? "runuser" : join(bin, cmd), asRoot ? ["-u", "postgres", "--", join(bin, cmd), ...args] : args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]);
  const port = await freePort();
  run("pg_ctl", ["-D", data, "-l", join(dir, "log"), "-w", "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300`, "start"]);
  const psql = (db: string, statement: string) =>
    execFileSync(join(bin, "psql"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", db, "-v", "ON_ERROR_STOP=1", "-qAtc", statement], { encoding: "utf8" });
  psql("postgres", "CREATE DATABASE app");
  return {
    port,
    sql: (statement) => psql("app", statement),
    stop: () => {
      try {
        run("pg_ctl", ["-D", data, "-m", "immediate", "stop"]);
      } catch {
        /* already gone */
      }
    },
  };
}

/** MariaDB's server binaries (Debian's mariadb-server), when installed. */
export function mariadbBin(): { server: string; install: string } | undefined {
  const server = ["/usr/sbin/mariadbd", "/usr/sbin/mysqld"].find((p) => existsSync(p));
  const install = ["/usr/bin/mariadb-install-db", "/usr/bin/mysql_install_db"].find((p) => existsSync(p));
  return server && install ? { server, install } : undefined;
}

export interface Mariadb {
  port: number;
  stop(): void;
}

/** A throwaway MariaDB server on 127.0.0.1 (grant tables skipped: any user connects; the test needs none). */
export async function startMariadb(bin: { server: string; install: string }): Promise<Mariadb> {
  const dir = tempDir();
  chmodSync(dir, 0o777);
  const data = join(dir, "data");
  const user = process.getuid?.() === 0 ? ["--user=root"] : [];
  execFileSync(bin.install, [`--datadir=${data}`, "--auth-root-authentication-method=normal", "--skip-test-db", ...user], { stdio: "ignore" });
  const port = await freePort();
  const child = spawn(
    bin.server,
    [
      `--datadir=${data}`,
      `--socket=${join(dir, "sock")}`,
      `--port=${port}`,
      "--bind-address=127.0.0.1",
      "--skip-grant-tables",
      "--skip-name-resolve",
      `--pid-file=${join(dir, "pid")}`,
      `--log-error=${join(dir, "err.log")}`,
      ...user,
    ],
    { stdio: "ignore" },
  );
  await listening(port, 30_000, "MariaDB").catch((err: unknown) => {
    child.kill("SIGKILL");
    throw err;
  });
  return { port, stop: () => child.kill("SIGKILL") };
}

/** Debian's redis-server, when installed. */
export function redisBin(): string | undefined {
  return ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].find((p) => existsSync(p));
}

export interface RedisServer {
  url: string;
  stop(): void;
}

/** A throwaway Redis on 127.0.0.1 (no persistence), on an OS-picked port; resolves once it accepts connections. */
export async function startRedis(bin: string): Promise<RedisServer> {
  const port = await freePort();
  const child = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tempDir()], { stdio: "ignore" });
  await listening(port, 10_000, "redis-server").catch((err: unknown) => {
    child.kill("SIGKILL");
    throw err;
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: () => {
      child.kill("SIGKILL");
    },
  };
}

/** Resolves once 127.0.0.1:`port` accepts a connection; rejects after `timeoutMs` saying `what` did not start. */
async function listening(port: number, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.destroy();
        resolve(true);
      });
      socket.on("error", () => resolve(false));
    });
    if (up) return;
    if (Date.now() > deadline) throw new Error(`${what} did not start`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

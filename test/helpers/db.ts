/**
 * The scheduler database a test uses: a fresh SQLite file, or, when the run is against PostgreSQL
 * (`npm run test:postgres`: global-setup.ts starts a throwaway server and sets
 * KILN_TEST_POSTGRES_URL), a fresh database on that server. Every scheduler a test starts takes
 * its database from here, so the whole suite runs on either engine.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { postgresBin } from "./postgres.js";
import { PG_PASSWORD, SECRETS_KEY } from "./secrets.js";
import { tempDir } from "./temp.js";

/** The server's URL (no database) when the run is against PostgreSQL. */
export const TEST_POSTGRES_URL = process.env.KILN_TEST_POSTGRES_URL;

/** Creates an empty database on the PostgreSQL server at `serverUrl` (`postgres://user:pw@host:port`); returns its URL. */
export function createPostgresDatabase(serverUrl: string): string {
  const name = `kiln_${randomBytes(6).toString("hex")}`;
  const u = new URL(serverUrl);
  execFileSync(
    join(postgresBin()!, "psql"),
    ["-h", u.hostname, "-p", u.port, "-U", decodeURIComponent(u.username), "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qAtc", `CREATE DATABASE ${name}`],
    { stdio: "ignore" },
  );
  return `${serverUrl.replace(/\/$/, "")}/${name}`;
}

/** A new, empty scheduler database for one test: a SQLite file, or a PostgreSQL URL in a PostgreSQL run. */
export function testDb(): string {
  return TEST_POSTGRES_URL ? createPostgresDatabase(TEST_POSTGRES_URL) : join(tempDir(), "kiln.db");
}

/** The settings a scheduler needs besides `--db` on that database (PostgreSQL wants a shared secrets key). */
export function dbSettings(db: string): { secretsKey?: string } {
  return /^postgres/.test(db) ? { secretsKey: SECRETS_KEY } : {};
}

/** A PostgreSQL server URL with a password (the server trusts loopback; the password shows that no log carries it). */
export function postgresServerUrl(port: number): string {
  return `postgres://postgres:${PG_PASSWORD}@127.0.0.1:${port}`;
}

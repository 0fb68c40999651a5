/**
 * The scheduler's SQLite database (better-sqlite3): accounts, API keys, settings. Schema changes
 * are numbered migrations applied in order at open, tracked by `PRAGMA user_version`.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";

export type Db = Database.Database;

const MIGRATIONS: string[] = [
  `CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE accounts (
     name TEXT PRIMARY KEY,
     tier TEXT NOT NULL CHECK (tier IN ('free', 'standard', 'pro', 'enterprise')),
     rpm INTEGER,
     created_at INTEGER NOT NULL
   );
   CREATE TABLE api_keys (
     id TEXT PRIMARY KEY,
     account TEXT NOT NULL REFERENCES accounts(name),
     tier TEXT NOT NULL,
     rpm INTEGER,
     token_sha256 TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     expires_at INTEGER,
     revoked_at INTEGER
   );
   CREATE INDEX api_keys_account ON api_keys(account);`,
];

/** Opens (creating if needed) the database at `path` and brings its schema up to date. */
export function openDatabase(path: string): Db {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("busy_timeout = 5000");
  db.pragma("foreign_keys = ON");
  const version = db.pragma("user_version", { simple: true }) as number;
  for (let v = version; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
  return db;
}

export function getSetting(db: Db, name: string): string | undefined {
  return (db.prepare("SELECT value FROM settings WHERE name = ?").get(name) as { value: string } | undefined)?.value;
}

/** Stores `value` unless the setting exists; returns the stored value either way (race-safe). */
export function ensureSetting(db: Db, name: string, value: string): string {
  db.prepare("INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)").run(name, value);
  return getSetting(db, name)!;
}

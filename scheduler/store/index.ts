/**
 * The scheduler's SQLite database (better-sqlite3): accounts, API keys, settings, MCP
 * configurations, the accounts' encrypted secrets and the usage ledger. Schema changes
 * are numbered migrations applied in order at open, tracked by `PRAGMA user_version`.
 */
import { openDatabase, type Db } from "../../core/sqlite.js";

export type { Db } from "../../core/sqlite.js";

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
  `CREATE TABLE mcp_servers (
     id TEXT PRIMARY KEY,
     account TEXT NOT NULL,
     name TEXT NOT NULL,
     description TEXT,
     server_type TEXT NOT NULL,
     config TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   );
   CREATE INDEX mcp_servers_account ON mcp_servers(account);`,
  `CREATE TABLE account_secrets (
     account TEXT NOT NULL,
     name TEXT NOT NULL,
     nonce BLOB NOT NULL,
     ciphertext BLOB NOT NULL,
     tag BLOB NOT NULL,
     updated_at INTEGER NOT NULL,
     PRIMARY KEY (account, name)
   );`,
  `CREATE TABLE usage (
     id INTEGER PRIMARY KEY,
     at INTEGER NOT NULL,
     day TEXT NOT NULL,
     account TEXT NOT NULL,
     key_id TEXT NOT NULL,
     model TEXT NOT NULL,
     kind TEXT NOT NULL,
     prompt_tokens INTEGER NOT NULL,
     completion_tokens INTEGER NOT NULL,
     audio_seconds REAL NOT NULL,
     request_id TEXT NOT NULL
   );
   CREATE INDEX usage_account_day ON usage(account, day);`,
];

/** Opens (creating if needed) the scheduler's database at `path`, schema up to date. */
export function openSchedulerDatabase(path: string): Db {
  return openDatabase(path, MIGRATIONS);
}

export function getSetting(db: Db, name: string): string | undefined {
  return (db.prepare("SELECT value FROM settings WHERE name = ?").get(name) as { value: string } | undefined)?.value;
}

/** Stores `value` unless the setting exists; returns the stored value either way (race-safe). */
export function ensureSetting(db: Db, name: string, value: string): string {
  db.prepare("INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)").run(name, value);
  return getSetting(db, name)!;
}

/**
 * The scheduler's schema as numbered migrations, one list for both engines: each is written once
 * against the column types of the dialect it runs on (SQLite's INTEGER is PostgreSQL's BIGINT; a
 * BLOB is a BYTEA). A store applies the ones its database lacks, in order, at open.
 */
import type { Dialect } from "./sql.js";

interface Types {
  /** A whole number (Unix seconds or ms, counts). */
  int: string;
  /** A floating-point number. */
  real: string;
  /** Bytes. */
  bytes: string;
  /** A row id the database assigns. */
  rowId: string;
  /** Which engine: for what only one of them has (PostgreSQL's triggers that notify). */
  dialect: Dialect;
}

const TYPES: Record<Dialect, Types> = {
  sqlite: { int: "INTEGER", real: "REAL", bytes: "BLOB", rowId: "INTEGER PRIMARY KEY", dialect: "sqlite" },
  postgres: { int: "BIGINT", real: "DOUBLE PRECISION", bytes: "BYTEA", rowId: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", dialect: "postgres" },
};

/** The PostgreSQL channel a commit that changes keys or accounts notifies. */
export const KEYS_CHANNEL = "kiln_keys";

const MIGRATIONS: ((t: Types) => string)[] = [
  (t) => `CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE accounts (
     name TEXT PRIMARY KEY,
     tier TEXT NOT NULL CHECK (tier IN ('free', 'standard', 'pro', 'enterprise')),
     rpm ${t.int},
     created_at ${t.int} NOT NULL
   );
   CREATE TABLE api_keys (
     id TEXT PRIMARY KEY,
     account TEXT NOT NULL REFERENCES accounts(name),
     tier TEXT NOT NULL,
     rpm ${t.int},
     token_sha256 TEXT NOT NULL,
     created_at ${t.int} NOT NULL,
     expires_at ${t.int},
     revoked_at ${t.int}
   );
   CREATE INDEX api_keys_account ON api_keys(account);`,
  (t) => `CREATE TABLE mcp_servers (
     id TEXT PRIMARY KEY,
     account TEXT NOT NULL,
     name TEXT NOT NULL,
     description TEXT,
     server_type TEXT NOT NULL,
     config TEXT NOT NULL,
     created_at ${t.int} NOT NULL,
     updated_at ${t.int} NOT NULL
   );
   CREATE INDEX mcp_servers_account ON mcp_servers(account);`,
  (t) => `CREATE TABLE account_secrets (
     account TEXT NOT NULL,
     name TEXT NOT NULL,
     nonce ${t.bytes} NOT NULL,
     ciphertext ${t.bytes} NOT NULL,
     tag ${t.bytes} NOT NULL,
     updated_at ${t.int} NOT NULL,
     PRIMARY KEY (account, name)
   );`,
  (t) => `CREATE TABLE usage (
     id ${t.rowId},
     at ${t.int} NOT NULL,
     day TEXT NOT NULL,
     account TEXT NOT NULL,
     key_id TEXT NOT NULL,
     model TEXT NOT NULL,
     kind TEXT NOT NULL,
     prompt_tokens ${t.int} NOT NULL,
     completion_tokens ${t.int} NOT NULL,
     audio_seconds ${t.real} NOT NULL,
     request_id TEXT NOT NULL
   );
   CREATE INDEX usage_account_day ON usage(account, day);`,
  // The operator's model catalog (scheduler/catalog): one row per entry (its JSON) in the catalog's order, and one
  // row of its version, raised by every write, which each scheduler polls to take up another's edit.
  (t) => `CREATE TABLE model_catalog (
     position ${t.int} PRIMARY KEY,
     id TEXT NOT NULL UNIQUE,
     entry TEXT NOT NULL
   );
   CREATE TABLE model_catalog_version (
     singleton ${t.int} PRIMARY KEY CHECK (singleton = 1),
     version ${t.int} NOT NULL,
     updated_at ${t.int} NOT NULL
   );
   INSERT INTO model_catalog_version (singleton, version, updated_at) VALUES (1, 0, 0);`,
  // Placement claims (scheduler/catalog/claims.ts): which scheduler places a model's next replica, until when, so that
  // two schedulers seeing the same cold model at once order one load.
  (t) => `CREATE TABLE placement_claims (
     model TEXT PRIMARY KEY,
     owner TEXT NOT NULL,
     until_ms ${t.int} NOT NULL
   );`,
  // PostgreSQL: a commit that changes keys or accounts notifies KEYS_CHANNEL, so that every scheduler's
  // remembered key records (scheduler/auth/keys.ts) are read again (PostgresStore.changeCount). SQLite
  // counts changes in the process (PRAGMA data_version) and needs nothing.
  (t) =>
    t.dialect === "postgres"
      ? `CREATE FUNCTION kiln_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('${KEYS_CHANNEL}', ''); RETURN NULL; END $$;
   CREATE TRIGGER api_keys_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys FOR EACH STATEMENT EXECUTE PROCEDURE kiln_keys_changed();
   CREATE TRIGGER accounts_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON accounts FOR EACH STATEMENT EXECUTE PROCEDURE kiln_keys_changed();`
      : `SELECT 1;`,
];

/** The migrations as `dialect` runs them. */
export function migrations(dialect: Dialect): string[] {
  return MIGRATIONS.map((m) => m(TYPES[dialect]));
}

/**
 * Opening a SQLite database (better-sqlite3) with its schema as numbered migrations, applied in
 * order at open and tracked by `PRAGMA user_version`. WAL, a busy timeout and foreign keys on.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { ConfigError } from "./errors.js";

export type Db = Database.Database;

/** Opens (creating if needed) the database at `path` and applies the migrations it lacks. */
export function openDatabase(path: string, migrations: readonly string[]): Db {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("busy_timeout = 5000");
  db.pragma("foreign_keys = ON");
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version > migrations.length) {
    db.close();
    throw new ConfigError(path, `schema version ${version} is newer than this Kiln's ${migrations.length}: a newer Kiln migrated it; run that version`);
  }
  for (let v = version; v < migrations.length; v++) {
    db.transaction(() => {
      db.exec(migrations[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
  return db;
}

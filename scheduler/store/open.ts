/**
 * The scheduler's database: accounts, API keys, settings, MCP configurations, the accounts'
 * encrypted secrets and the usage ledger, behind one interface (`Store`) on either engine:
 * SQLite, a file (the default: `kiln dev`, one scheduler), or PostgreSQL, a `postgres://` URL
 * that several schedulers share. Both run the same numbered migrations at open.
 */
import type { Logger } from "../../core/log.js";
import { PostgresStore } from "./postgres.js";
import { SqliteStore, type SqliteStoreOptions } from "./sqlite.js";
import type { Store } from "./sql.js";

/** True when `--db` names a PostgreSQL server rather than a SQLite file. */
export function isPostgresUrl(db: string): boolean {
  return /^postgres(ql)?:\/\//i.test(db);
}

export interface OpenStoreOptions extends SqliteStoreOptions {
  /** Connections in the PostgreSQL pool. Default 10. */
  poolSize?: number;
  logger: Logger;
}

/** Opens `db` (a SQLite file, `:memory:`, or a `postgres://` URL), its schema up to date. */
export async function openStore(db: string, options: OpenStoreOptions): Promise<Store> {
  return isPostgresUrl(db) ? PostgresStore.open({ url: db, ...options }) : new SqliteStore(db, options);
}

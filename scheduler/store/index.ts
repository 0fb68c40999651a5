/** The scheduler's database (`./open.ts`): one `Store` on SQLite or PostgreSQL, and its settings (`./settings.ts`). */
export { isPostgresUrl, openStore, type OpenStoreOptions } from "./open.js";
export { ensureSetting, getSetting } from "./settings.js";
export type { Dialect, SqlRunner, SqlValue, Store } from "./sql.js";

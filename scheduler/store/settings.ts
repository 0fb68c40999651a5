/** The `settings` table: named values the schedulers sharing a database agree on. */
import type { Store } from "./sql.js";

export async function getSetting(store: Store, name: string): Promise<string | undefined> {
  return (await store.get<{ value: string }>("SELECT value FROM settings WHERE name = ?", [name]))?.value;
}

/** Stores `value` unless the setting exists; returns the stored value either way (safe when schedulers race). */
export async function ensureSetting(store: Store, name: string, value: string): Promise<string> {
  await store.run("INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", [name, value]);
  return (await getSetting(store, name))!;
}

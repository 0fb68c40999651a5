/**
 * The operator's model catalog in the scheduler's database (migration 5): `model_catalog`, one row
 * per entry (its JSON) in the catalog's order, and `model_catalog_version`, one row whose version
 * every write raises. Writes and reads take one lock, so a reader never sees half of a write.
 */
import type { OperatorCatalogEntry } from "../../models/operator-catalog.js";
import type { SqlRunner, Store } from "../store/index.js";

/** The lock every write and read of the catalog takes (PostgreSQL: an advisory lock; SQLite's transactions already serialize). */
const LOCK = "kiln:model_catalog";

/** The catalog as stored: its entries as written (unchecked: the caller parses them), its version, and when it was written. */
export interface StoredCatalog {
  /** Raised by every write; 0 until the first. */
  version: number;
  /** Unix ms of the last write; 0 until the first. */
  updatedAt: number;
  /** The entries' JSON, parsed, in order. Empty: no operator catalog is stored. */
  entries: unknown[];
}

export class CatalogStore {
  constructor(private readonly db: Store) {}

  /** The stored version (one row: what each scheduler polls). */
  async version(): Promise<number> {
    return (await this.db.get<{ version: number }>("SELECT version FROM model_catalog_version WHERE singleton = 1"))?.version ?? 0;
  }

  /** The whole stored catalog, its version with it. */
  async read(): Promise<StoredCatalog> {
    return this.db.transaction(async (tx) => this.readIn(tx), { lock: LOCK });
  }

  /** Replaces the stored catalog with `entries` (none: removes it) in one transaction; returns what is stored now. */
  async replace(entries: readonly OperatorCatalogEntry[]): Promise<StoredCatalog> {
    return this.db.transaction(
      async (tx) => {
        await tx.run("DELETE FROM model_catalog");
        for (const [position, entry] of entries.entries()) {
          await tx.run("INSERT INTO model_catalog (position, id, entry) VALUES (?, ?, ?)", [position, entry.id, JSON.stringify(entry)]);
        }
        await tx.run("UPDATE model_catalog_version SET version = version + 1, updated_at = ? WHERE singleton = 1", [Date.now()]);
        return this.readIn(tx);
      },
      { lock: LOCK },
    );
  }

  private async readIn(tx: SqlRunner): Promise<StoredCatalog> {
    const head = await tx.get<{ version: number; updated_at: number }>("SELECT version, updated_at FROM model_catalog_version WHERE singleton = 1");
    const rows = await tx.all<{ entry: string }>("SELECT entry FROM model_catalog ORDER BY position");
    return { version: head?.version ?? 0, updatedAt: head?.updated_at ?? 0, entries: rows.map((r) => JSON.parse(r.entry) as unknown) };
  }
}

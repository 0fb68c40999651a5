/**
 * The model catalog a scheduler serves: the operator's (models/operator-catalog.ts), stored in the
 * database so that every scheduler sharing it serves the same one, or, while none is stored, the
 * eight built-in ids (models/catalog.ts) and whatever the agents' `--serve` offers.
 *
 * `--catalog FILE` replaces the stored catalog at start; the dashboard replaces or removes it while
 * running. Each scheduler asks the stored version every `pollMs` (2 s) and reads the whole catalog
 * again when it changed, so an edit through one scheduler reaches the others within that time; the
 * scheduler that wrote it serves it at once.
 */
import { ConfigError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { isCatalogModel } from "../../models/catalog.js";
import { catalogNames, parseOperatorCatalog, type OperatorCatalog, type OperatorCatalogEntry } from "../../models/operator-catalog.js";
import type { Store } from "../store/index.js";
import { CatalogStore, type StoredCatalog } from "./store.js";

/** How often each scheduler asks the stored catalog's version, by default (ms). */
export const CATALOG_POLL_MS = 2000;

export interface ModelCatalogOptions {
  store: Store;
  /** `--catalog`: written over the stored catalog at open. Default none (the stored one is served). */
  file?: OperatorCatalog;
  /** How often the stored version is asked (ms). Default CATALOG_POLL_MS. */
  pollMs?: number;
  logger: Logger;
}

export class ModelCatalog {
  private readonly stored: CatalogStore;
  private current: { version: number; updatedAt: number; models: readonly OperatorCatalogEntry[]; names: ReadonlyMap<string, OperatorCatalogEntry> } = {
    version: 0,
    updatedAt: 0,
    models: [],
    names: new Map(),
  };
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  /** The poll in progress (one at a time). */
  private polling: Promise<boolean> | undefined;
  /** The version whose stored rows failed their checks (logged once, not at every poll). */
  private refusedVersion: number | undefined;
  private failing = false;

  private constructor(
    private readonly options: ModelCatalogOptions,
    store: Store,
  ) {
    this.stored = new CatalogStore(store);
  }

  /**
   * The catalog of `options.store`, after `options.file` replaced it; polling from then on. A stored
   * catalog that fails its checks (a row written by hand, or by a newer Kiln with fields this one
   * does not know) fails the start with the entry and field at fault.
   */
  static async open(options: ModelCatalogOptions): Promise<ModelCatalog> {
    const catalog = new ModelCatalog(options, options.store);
    if (options.file) {
      catalog.apply(await catalog.stored.replace(options.file.models), options.file);
      options.logger.info({ models: options.file.models.length, version: catalog.version }, "model catalog: --catalog replaced the stored catalog");
    } else {
      const stored = await catalog.stored.read();
      let parsed: OperatorCatalog | undefined;
      try {
        parsed = checked(stored);
      } catch (err) {
        throw new ConfigError("--db / KILN_DB", `the model catalog stored in ${options.store.location} (version ${stored.version}) is refused: ${(err as Error).message}`);
      }
      catalog.apply(stored, parsed);
      if (parsed) options.logger.info({ models: parsed.models.length, version: stored.version }, "model catalog: serving the stored catalog");
    }
    catalog.timer = setInterval(() => void catalog.refresh(), options.pollMs ?? CATALOG_POLL_MS).unref();
    return catalog;
  }

  /** Whether an operator's catalog is in force (else the built-in ids are). */
  get active(): boolean {
    return this.current.models.length > 0;
  }

  /** The operator's entries, in the catalog's order; none while no operator catalog is in force. */
  get entries(): readonly OperatorCatalogEntry[] {
    return this.current.models;
  }

  /** The stored version this scheduler serves (0: none was ever written). */
  get version(): number {
    return this.current.version;
  }

  /** Unix ms of the write this scheduler serves (0: none). */
  get updatedAt(): number {
    return this.current.updatedAt;
  }

  /** The operator's entry an id or alias names; undefined for any other name, and while no operator catalog is in force. */
  resolve(idOrAlias: string): OperatorCatalogEntry | undefined {
    return this.current.names.get(idOrAlias);
  }

  /**
   * The id the API serves a request's `model` as: with an operator catalog, its entry's id (for
   * the id or an alias), else undefined; without one, a built-in id as it is.
   */
  canonical(model: string): string | undefined {
    if (this.active) return this.resolve(model)?.id;
    return isCatalogModel(model) ? model : undefined;
  }

  /** Calls `listener` after each change this scheduler takes up (its own write, or another's seen by a poll); returns its removal. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stores `catalog` over the stored one (undefined: removes it, back to the built-in ids) and serves it at once. */
  async replace(catalog: OperatorCatalog | undefined): Promise<void> {
    const stored = await this.stored.replace(catalog?.models ?? []);
    this.apply(stored, checked(stored));
    this.options.logger.info(
      { models: catalog?.models.length ?? 0, version: stored.version },
      catalog ? "model catalog replaced" : "model catalog removed: the built-in ids are served",
    );
  }

  /**
   * Asks the stored version, and takes up the stored catalog when it differs from the one served.
   * Resolves true when it changed. A catalog that fails its checks is logged and not served (the
   * current one stays); a database that cannot be reached is logged once until it answers again.
   */
  refresh(): Promise<boolean> {
    this.polling ??= this.poll().finally(() => (this.polling = undefined));
    return this.polling;
  }

  close(): void {
    clearInterval(this.timer);
    this.listeners.clear();
  }

  private async poll(): Promise<boolean> {
    try {
      const version = await this.stored.version();
      this.failing = false;
      if (version === this.current.version || version === this.refusedVersion) return false;
      const stored = await this.stored.read();
      if (stored.version === this.current.version) return false;
      let parsed: OperatorCatalog | undefined;
      try {
        parsed = checked(stored);
      } catch (err) {
        this.refusedVersion = stored.version;
        this.options.logger.error({ version: stored.version, err: (err as Error).message }, "model catalog: the stored catalog is refused; the previous one is still served");
        return false;
      }
      this.apply(stored, parsed);
      this.options.logger.info({ models: parsed?.models.length ?? 0, version: stored.version }, "model catalog: took up another scheduler's change");
      return true;
    } catch (err) {
      if (!this.failing) this.options.logger.warn({ err: (err as Error).message }, "model catalog: the database cannot be read; the current catalog is still served");
      this.failing = true;
      return false;
    }
  }

  private apply(stored: StoredCatalog, catalog: OperatorCatalog | undefined): void {
    // a poll that read before a write of this scheduler's own may end after it: never go back to an older version
    if (stored.version < this.current.version) return;
    const models = Object.freeze([...(catalog?.models ?? [])].map((e) => Object.freeze({ ...e, aliases: Object.freeze([...e.aliases]) as string[] })));
    this.current = { version: stored.version, updatedAt: stored.updatedAt, models, names: catalogNames({ models }) };
    this.refusedVersion = undefined;
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (err) {
        this.options.logger.error({ err: (err as Error).message }, "model catalog: a change listener failed");
      }
    }
  }
}

/** A stored catalog checked as a file would be (undefined when none is stored); throws the OperatorCatalogError. */
function checked(stored: StoredCatalog): OperatorCatalog | undefined {
  return stored.entries.length > 0 ? parseOperatorCatalog({ models: stored.entries }) : undefined;
}

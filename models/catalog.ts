/**
 * The built-in model catalog: the chat model identifiers the API accepts while no operator's catalog is in force
 * (models/operator-catalog.ts, scheduler/catalog; README, "API"). A request naming anything else is a 400; a catalog
 * model that no connected agent serves is a 503. Agents map these ids to GGUF files with `--serve ID=GGUF`.
 */
export interface CatalogModel {
  /** The public id, exactly as clients send it. */
  id: string;
  /** The family token, reported as `owned_by` in the model list. */
  family: string;
  /** A human name for shape B of `/v1/models`. */
  name: string;
}

const IDS = [
  "famA4:70b",
  "famA4:405b",
  "famB-v3.1",
  "famC-k2",
  "famD3-coder:480b",
  "famD3-max",
  "famE-code-fast-1",
  "famF-sonnet-4",
] as const;

export type ModelId = (typeof IDS)[number];

/** When the catalog was published; reported as `created` (shape A). */
export const CATALOG_CREATED = 1735689600; // 2025-01-01T00:00:00Z

export const CHAT_MODELS: readonly CatalogModel[] = IDS.map((id) => ({
  id,
  family: /^fam[A-Z]/.exec(id)?.[0] ?? id,
  name: id.replace(/[-:]/g, " "),
}));

export function isCatalogModel(id: string): id is ModelId {
  return (IDS as readonly string[]).includes(id);
}

/** The model `kiln dev` serves when given no `--serve`: the fabricated random-weight test model. */
export const DEV_MODEL_ID: ModelId = "famE-code-fast-1";

/** The model catalog a scheduler serves (`service.ts`), where it is stored (`store.ts`), and where each model's status comes from (`status.ts`). */
export { CATALOG_POLL_MS, ModelCatalog, type ModelCatalogOptions } from "./service.js";
export { CatalogStore, type StoredCatalog } from "./store.js";
export { MODEL_STATUSES, type ModelStatus, type ModelStatusSource } from "./status.js";
export { StoreClaims } from "./claims.js";
export { catalogPlacement, placedModel } from "./placement.js";

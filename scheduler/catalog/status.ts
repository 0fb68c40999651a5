/**
 * Where shape B of `GET /v1/models` gets each model's `status`: an interface, which the fleet
 * implements (`Fleet.statusOf`: what is ready, what loads, what placement could fit where).
 */

/** The statuses a model of the catalog can have (README, "GET /v1/models"). */
export const MODEL_STATUSES = ["available", "loading", "placeable", "too_large", "unavailable"] as const;

/**
 * - `available`: a replica is ready (a connected agent serves it);
 * - `loading`: none is ready, one is being loaded;
 * - `placeable`: none is loaded, and a node has room for one;
 * - `too_large`: no node could ever hold it;
 * - `unavailable`: none is loaded, and none can be placed now.
 */
export type ModelStatus = (typeof MODEL_STATUSES)[number];

export interface ModelStatusSource {
  /** The status of the model whose canonical id is `id`. */
  statusOf(id: string): ModelStatus;
  /** While it is `loading`: how far its furthest replica is, 0–1 (the download, then the load). */
  progressOf?(id: string): number | undefined;
}

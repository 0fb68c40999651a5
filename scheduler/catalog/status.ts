/**
 * Where shape B of `GET /v1/models` gets each model's `status`: an interface, so that the placement
 * (which knows what is loading, what fits where) can answer it; `fleetModelStatus` answers from what
 * the fleet shows today (a connected agent serves the model, or none does).
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
}

/** The status the fleet alone can tell: `available` while a connected, non-draining agent serves the model, else `unavailable`. */
export function fleetModelStatus(fleet: { serves(model: string): boolean }): ModelStatusSource {
  return { statusOf: (id) => (fleet.serves(id) ? "available" : "unavailable") };
}

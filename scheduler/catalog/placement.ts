/**
 * The operator's catalog as the fleet's placement reads it (scheduler/placement): each entry's
 * source, shape and replica bounds, and the memory one replica takes — its `memory_bytes`, else the
 * estimate from its GGUF header (read from the hub or the path once per source and shape; after a
 * failure, again a minute later).
 */
import type { OperatorCatalogEntry } from "../../models/operator-catalog.js";
import { parseSpeculation } from "../../core/speculation.js";
import type { HubSource } from "../../hub/index.js";
import type { FleetPlacement } from "../fleet/index.js";
import { estimateReplica, headerLocation, type PlacedModel } from "../placement/index.js";
import type { StoreClaims } from "./claims.js";
import type { ModelCatalog } from "./service.js";

/** How long reading a GGUF header may take. */
const HEADER_TIMEOUT_MS = 30_000;
/** How long a failed estimate stands before the header is read again. */
const SIZE_RETRY_MS = 60_000;

export function placedModel(e: OperatorCatalogEntry): PlacedModel {
  return {
    id: e.id,
    source: e.source,
    contextSize: e.context_size,
    sequences: e.sequences,
    minReplicas: e.min_replicas,
    maxReplicas: e.max_replicas,
    idleUnloadS: e.idle_unload_s,
    ...(e.memory_bytes !== undefined ? { memoryBytes: e.memory_bytes } : {}),
    ...(e.speculative !== undefined ? { speculative: e.speculative } : {}),
  };
}

export function catalogPlacement(catalog: ModelCatalog, hub: HubSource, claims?: StoreClaims): FleetPlacement {
  const sizes = new Map<string, Promise<number>>();
  return {
    model: (id) => {
      const entry = catalog.resolve(id);
      return entry && entry.id === id ? placedModel(entry) : undefined;
    },
    models: () => (catalog.active ? catalog.entries.map(placedModel) : []),
    size: (model) => {
      if (model.memoryBytes !== undefined) return Promise.resolve(model.memoryBytes);
      const speculation = model.speculative === undefined ? undefined : parseSpeculation(model.speculative);
      const draft = typeof speculation === "object" && speculation.kind === "draft" ? speculation.source : undefined;
      const key = JSON.stringify([model.source, model.contextSize, model.sequences, draft]);
      let size = sizes.get(key);
      if (!size) {
        // an estimate that failed, or left the draft out, stands a minute: listings and waiting requests do not ask the hub each time
        const forgetLater = (): void => void setTimeout(() => sizes.get(key) === size && sizes.delete(key), SIZE_RETRY_MS).unref();
        size = (async () => {
          const signal = AbortSignal.timeout(HEADER_TIMEOUT_MS);
          const estimate = (at: { file: string; headers?: Record<string, string> }, shape: PlacedModel) =>
            estimateReplica(at.file, shape, { ...(at.headers ? { headers: at.headers } : {}), signal });
          const [at, draftAt] = await Promise.all([
            headerLocation(model.source, hub, signal),
            draft === undefined ? undefined : headerLocation(draft, hub, signal).catch(() => undefined),
          ]);
          const own = await estimate(at, model);
          if (draft === undefined) return own.bytes;
          // the model as its own draft (two references to one file) adds a second context on the same weights
          if (draftAt?.file === at.file) return own.bytes + own.contextBytes;
          // a draft loads beside the replica with a context of the same shape, no longer than the replica's
          const drafted = draftAt && (await estimate(draftAt, { ...model, contextSize: own.contextSize }).catch(() => undefined));
          // a draft the scheduler cannot read (a path on the nodes only, a hub that failed): the model alone is counted
          // (memory_bytes can correct it) until the draft's header is tried again
          if (!drafted) forgetLater();
          return own.bytes + (drafted?.bytes ?? 0);
        })();
        sizes.set(key, size);
        size.catch(forgetLater);
      }
      return size;
    },
    ...(claims ? { claims } : {}),
  };
}

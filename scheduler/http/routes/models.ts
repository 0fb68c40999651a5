/** `GET /v1/models`: both list shapes (`data` and `models`) in one body (README, "API"); `GET /v1/models/{id}`: one model (by its id or an alias), OpenAI's shape. */
import { Hono } from "hono";
import { NotFoundError } from "../../../core/errors.js";
import { describeValue } from "../../../core/validate.js";
import { CATALOG_CREATED, CHAT_MODELS } from "../../../models/catalog.js";
import { DEFAULT_AUDIO_MODEL, type AgentSnapshot, type Fleet } from "../../fleet/index.js";
import type { AppEnv } from "../env.js";
import type { ModelCatalog, ModelStatusSource } from "../../catalog/index.js";
import { oncePerTurn } from "../../../core/per-turn.js";

const GIB = 1024 ** 3;
const JSON_TYPE = { "content-type": "application/json" };

/** The strongest hardware among the agents serving a model: its GPU, or the CPU node's memory. */
function hardwareOf(agents: AgentSnapshot[]): { gpu_type: string; memory_gb: number } {
  let best = { gpu_type: "", memory_gb: 0 };
  for (const a of agents) {
    const hw = a.hardware;
    if (!hw) continue;
    const gpu = hw.gpus[0];
    const candidate =
      gpu && hw.compute !== "cpu"
        ? { gpu_type: gpu.model, memory_gb: Math.round(gpu.memory_total_bytes / GIB) }
        : { gpu_type: "none (CPU)", memory_gb: Math.round(hw.memory_total_bytes / GIB) };
    if (candidate.memory_gb > best.memory_gb || !best.gpu_type) best = candidate;
  }
  return best;
}

/** What the agents serving `model` can do with it: chat, and the capabilities of any pool serving it (sorted). */
function capabilitiesOf(agents: AgentSnapshot[], model: string): string[] {
  const found = new Set<string>();
  for (const a of agents) for (const p of a.pools) if (p.modelIds.includes(model)) for (const c of p.capabilities) found.add(c);
  return agents.length > 0 ? ["chat", ...[...found].sort()] : [];
}

/** A transcription model in the list: `whisper-1` and the whisper names some agent has installed (while one does). */
function audioModel(id: string) {
  return { id, object: "model" as const, created: CATALOG_CREATED, owned_by: "whisper" };
}

/** What the model routes read of the catalog (scheduler/catalog's ModelCatalog). */
export type ModelCatalogView = Pick<ModelCatalog, "active" | "entries" | "resolve" | "canonical" | "updatedAt">;

/**
 * The models: the operator's catalog when one is in force (its ids in `data`; in `models` each with its
 * aliases and the status `status` gives), else the built-in ids; then the whisper models agents offer.
 * `GET /v1/models/{id}` takes an alias too, and answers with the name asked for (as a completion does).
 */
export function modelRoutes(fleet: Fleet, catalog: ModelCatalogView, status: ModelStatusSource = fleet): Hono<AppEnv> {
  /** The chat models listed now: each with its id, name, owner, aliases, and when it was published. */
  const listed = () => {
    if (!catalog.active) return CHAT_MODELS.map((m) => ({ id: m.id, name: m.name, owned_by: m.family, aliases: [] as readonly string[], created: CATALOG_CREATED }));
    const created = Math.floor(catalog.updatedAt / 1000);
    return catalog.entries.map((e) => ({ id: e.id, name: e.name ?? e.id, owned_by: e.owned_by ?? "kiln", aliases: e.aliases, created }));
  };
  /**
   * `GET /v1/models`' body: built once per turn of the event loop (core/per-turn.ts) and sent as it
   * is to every listing of that turn, as a load balancer's or dashboard's polls come in bursts.
   */
  const listing = oncePerTurn(() => {
    const agents = fleet.snapshot().filter((a) => !a.draining);
    const audio = fleet.transcriptionModels().sort((a, b) => (a === DEFAULT_AUDIO_MODEL ? -1 : b === DEFAULT_AUDIO_MODEL ? 1 : a.localeCompare(b)));
    const chat = listed();
    return JSON.stringify({
      object: "list",
      data: [...chat.map((m) => ({ id: m.id, object: "model", created: m.created, owned_by: m.owned_by })), ...audio.map(audioModel)],
      models: [
        ...chat.map((m) => {
          const serving = agents.filter((a) => a.pools.some((p) => p.modelIds.includes(m.id)));
          const state = status.statusOf(m.id);
          const progress = state === "loading" ? status.progressOf?.(m.id) : undefined;
          return {
            id: m.id,
            name: m.name,
            aliases: m.aliases,
            status: state,
            ...(progress !== undefined ? { progress: Math.round(progress * 1000) / 1000 } : {}),
            ...hardwareOf(serving),
            capabilities: capabilitiesOf(serving, m.id),
          };
        }),
        ...audio.map((id) => ({
          id,
          name: id === DEFAULT_AUDIO_MODEL ? "Whisper (each node's default model)" : `Whisper ${id}`,
          aliases: [],
          status: "available",
          capabilities: ["transcription", "translation"],
        })),
      ],
    });
  });
  return new Hono<AppEnv>()
    .get("/:id{.+}", (c) => {
      const asked = c.req.param("id");
      const id = catalog.canonical(asked);
      const model = id === undefined ? undefined : listed().find((m) => m.id === id);
      if (!model && fleet.transcriptionModels().includes(asked)) return c.json(audioModel(asked));
      if (!model) throw new NotFoundError("model_not_found", `model: ${describeValue(asked)} is not a model of this service (see GET /v1/models)`);
      return c.json({ id: asked, object: "model", created: model.created, owned_by: model.owned_by });
    })
    .get("/", (c) => c.body(listing(), 200, JSON_TYPE));
}

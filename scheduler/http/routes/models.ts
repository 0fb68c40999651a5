/** `GET /v1/models`: both list shapes (`data` and `models`) in one body (README, "API"); `GET /v1/models/{id}`: one model, OpenAI's shape. */
import { Hono } from "hono";
import { NotFoundError } from "../../../core/errors.js";
import { CATALOG_CREATED, CHAT_MODELS } from "../../../models/catalog.js";
import { DEFAULT_AUDIO_MODEL, type AgentSnapshot, type Fleet } from "../../fleet/index.js";
import type { AppEnv } from "../env.js";

const GIB = 1024 ** 3;

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

export function modelRoutes(fleet: Fleet): Hono<AppEnv> {
  return new Hono<AppEnv>()
    .get("/:id{.+}", (c) => {
      const id = c.req.param("id");
      const model = CHAT_MODELS.find((m) => m.id === id);
      if (!model && fleet.transcriptionModels().includes(id)) return c.json(audioModel(id));
      if (!model) throw new NotFoundError("model_not_found", `model: "${id}" is not a model of this service (see GET /v1/models)`);
      return c.json({ id: model.id, object: "model", created: CATALOG_CREATED, owned_by: model.family });
    })
    .get("/", (c) => {
      const agents = fleet.snapshot().filter((a) => !a.draining);
      const audio = fleet.transcriptionModels().sort((a, b) => (a === DEFAULT_AUDIO_MODEL ? -1 : b === DEFAULT_AUDIO_MODEL ? 1 : a.localeCompare(b)));
      return c.json({
        object: "list",
        data: [...CHAT_MODELS.map((m) => ({ id: m.id, object: "model", created: CATALOG_CREATED, owned_by: m.family })), ...audio.map(audioModel)],
        models: [
          ...CHAT_MODELS.map((m) => {
            const serving = agents.filter((a) => a.pools.some((p) => p.modelIds.includes(m.id)));
            return { id: m.id, name: m.name, status: serving.length > 0 ? "available" : "unavailable", ...hardwareOf(serving), capabilities: capabilitiesOf(serving, m.id) };
          }),
          ...audio.map((id) => ({
            id,
            name: id === DEFAULT_AUDIO_MODEL ? "Whisper (each node's default model)" : `Whisper ${id}`,
            status: "available",
            capabilities: ["transcription", "translation"],
          })),
        ],
      });
    });
}

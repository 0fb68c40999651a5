/** `GET /v1/models` and `/v1/models/{id}` over the catalog: the built-in ids or the operator's, shape B's aliases, and each status from the ModelStatusSource given. */
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { onError } from "../../../core/http/index.js";
import { createLogger } from "../../../core/log.js";
import { CHAT_MODELS } from "../../../models/catalog.js";
import { parseOperatorCatalog, catalogNames } from "../../../models/operator-catalog.js";
import type { ModelStatus } from "../../catalog/index.js";
import { Fleet } from "../../fleet/index.js";
import type { AppEnv } from "../env.js";
import { modelRoutes, type ModelCatalogView } from "./models.js";

const logger = createLogger("test", "silent");
let fleet: Fleet;
afterEach(() => fleet?.close());

const builtin: ModelCatalogView = { active: false, entries: [], resolve: () => undefined, canonical: (m) => (CHAT_MODELS.some((c) => c.id === m) ? m : undefined), updatedAt: 0 };

function operator(models: Record<string, unknown>[], updatedAt = Date.parse("2026-11-20T10:00:00Z")): ModelCatalogView {
  const catalog = parseOperatorCatalog({ models });
  const names = catalogNames(catalog);
  return { active: true, entries: catalog.models, resolve: (n) => names.get(n), canonical: (n) => names.get(n)?.id, updatedAt };
}

type Listed = { data: { id: string; owned_by: string; created: number }[]; models: { id: string; name: string; aliases: string[]; status: string }[] };

/** GETs `path` of the routes, mounted behind the app's error handler (an ApiError as its JSON body). */
async function get(routes: ReturnType<typeof modelRoutes>, path = "/"): Promise<{ status: number; body: any }> {
  const res = await new Hono<AppEnv>().onError(onError(logger)).route("/", routes).request(path);
  return { status: res.status, body: await res.json() };
}

describe("the model list", () => {
  it("lists the eight built-in ids without an operator's catalog, no aliases, each status from the fleet: unavailable while no agent serves it", async () => {
    fleet = new Fleet({ queueSize: 1, queueTimeoutMs: 1000, heartbeatMs: 60_000, logger });
    const { body } = (await get(modelRoutes(fleet, builtin))) as { body: Listed };
    expect(body.data.map((m) => m.id)).toEqual(CHAT_MODELS.map((m) => m.id));
    expect(body.models.map((m) => [m.id, m.aliases, m.status])).toEqual(CHAT_MODELS.map((m) => [m.id, [], "unavailable"]));
  });

  it("takes each model's status from the ModelStatusSource it is given, by canonical id", async () => {
    fleet = new Fleet({ queueSize: 1, queueTimeoutMs: 1000, heartbeatMs: 60_000, logger });
    const statuses: Record<string, ModelStatus> = { "famA4:405b": "too_large", "famB-v3.1": "loading", big: "placeable", small: "available" };
    const asked: string[] = [];
    const source = {
      statusOf: (id: string): ModelStatus => {
        asked.push(id);
        return statuses[id] ?? "unavailable";
      },
    };
    const listed = (await get(modelRoutes(fleet, builtin, source))).body as Listed;
    expect(Object.fromEntries(listed.models.map((m) => [m.id, m.status]))).toMatchObject({ "famA4:405b": "too_large", "famB-v3.1": "loading", "famC-k2": "unavailable" });
    asked.length = 0;
    const catalog = operator([
      { id: "big", source: "/m/big.gguf", aliases: ["large"] },
      { id: "small", source: "/m/small.gguf" },
    ]);
    const own = (await get(modelRoutes(fleet, catalog, source))).body as Listed;
    expect(own.models.map((m) => [m.id, m.status])).toEqual([
      ["big", "placeable"],
      ["small", "available"],
    ]);
    expect(asked).toEqual(["big", "small"]); // never an alias
  });

  it("lists only the operator's ids when its catalog is in force, with aliases, names and owners in shape B and the catalog's time as created", async () => {
    fleet = new Fleet({ queueSize: 1, queueTimeoutMs: 1000, heartbeatMs: 60_000, logger });
    const catalog = operator([
      { id: "house/chat", source: "hf:org/repo:Q4_K_M", aliases: ["gpt-4o", "chat"], name: "House chat", owned_by: "acme" },
      { id: "famB-v3.1", source: "/m/b.gguf" },
    ]);
    const { body } = (await get(modelRoutes(fleet, catalog))) as { body: Listed };
    const created = Date.parse("2026-11-20T10:00:00Z") / 1000;
    expect(body.data).toEqual([
      { id: "house/chat", object: "model", created, owned_by: "acme" },
      { id: "famB-v3.1", object: "model", created, owned_by: "kiln" },
    ]);
    expect(body.models.map((m) => ({ id: m.id, name: m.name, aliases: m.aliases, status: m.status }))).toEqual([
      { id: "house/chat", name: "House chat", aliases: ["gpt-4o", "chat"], status: "unavailable" },
      { id: "famB-v3.1", name: "famB-v3.1", aliases: [], status: "unavailable" },
    ]);
  });
});

describe("one model", () => {
  it("answers an id or an alias with the name asked for; a name the catalog lacks, a built-in id included, is a 404 model_not_found", async () => {
    fleet = new Fleet({ queueSize: 1, queueTimeoutMs: 1000, heartbeatMs: 60_000, logger });
    const routes = modelRoutes(fleet, operator([{ id: "house/chat", source: "/m/c.gguf", aliases: ["gpt-4o"], owned_by: "acme" }]));
    const created = Date.parse("2026-11-20T10:00:00Z") / 1000;
    expect(await get(routes, "/gpt-4o")).toEqual({ status: 200, body: { id: "gpt-4o", object: "model", created, owned_by: "acme" } });
    expect(await get(routes, "/house/chat")).toEqual({ status: 200, body: { id: "house/chat", object: "model", created, owned_by: "acme" } });
    for (const name of ["famB-v3.1", "gpt-4"]) {
      const { status, body } = await get(routes, `/${name}`);
      expect(status).toBe(404);
      expect(body.error).toMatchObject({ code: "model_not_found", message: `model: "${name}" is not a model of this service (see GET /v1/models)` });
    }
    expect((await get(modelRoutes(fleet, builtin), "/famB-v3.1")).body).toEqual({ id: "famB-v3.1", object: "model", created: 1735689600, owned_by: "famB" });
  });
});

describe("a catalog model being placed", () => {
  it("shows status loading with how far its replica is (progress 0–1) while it loads, then available", async () => {
    const { RecordingLink } = await import("../../../test/helpers/recording-link.js");
    const placed = { id: "fam-x", source: "/m/x.gguf", contextSize: 512, sequences: 1, minReplicas: 0, maxReplicas: 1, idleUnloadS: 0, memoryBytes: 1000 };
    fleet = new Fleet({
      queueSize: 1,
      queueTimeoutMs: 1000,
      heartbeatMs: 60_000,
      logger,
      placement: { model: (id) => (id === "fam-x" ? placed : undefined), models: () => [placed], size: async () => 1000 },
    });
    const link = new RecordingLink();
    fleet.attach(
      {
        node_id: "n1",
        agent_version: "t",
        hardware: null,
        transcription: null,
        pools: [],
        placeable: true,
        devices: [{ name: "cpu", total_bytes: 10_000, free_bytes: 10_000 }],
        replicas: [],
      },
      link,
    );
    const state = (s: "LOADING" | "READY", progress: number) =>
      fleet.receive("n1", link, {
        body: "model_state",
        model_state: {
          model_id: "fam-x",
          state: s,
          progress,
          reason: "",
          device_bytes: [1000],
          pool: s === "READY" ? { model_ids: ["fam-x"], slots: 1, context_size: 512, fingerprint: "fp", capabilities: [] } : null,
        },
      });
    const routes = modelRoutes(fleet, operator([{ id: "fam-x", source: "/m/x.gguf", context_size: 512, sequences: 1 }]));
    state("LOADING", 0.4);
    expect(((await get(routes)) as { body: { models: unknown[] } }).body.models).toEqual([expect.objectContaining({ id: "fam-x", status: "loading", progress: 0.4 })]);
    // the node's report comes in a later turn of the event loop than the listing before it (a listing is built once per turn)
    await new Promise(setImmediate);
    state("READY", 1);
    const ready = ((await get(routes)) as { body: { models: Record<string, unknown>[] } }).body.models[0]!;
    expect(ready).toMatchObject({ status: "available" });
    expect(ready).not.toHaveProperty("progress");
  });
});

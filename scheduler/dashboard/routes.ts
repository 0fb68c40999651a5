/**
 * The dashboard: a static page at `/dashboard` and its admin API under `/admin/api`, behind the
 * admin token (`--admin-token` / `KILN_ADMIN_TOKEN`; without one the dashboard is off). It lists
 * accounts and keys, creates keys (shown once) and revokes them, and manages each account's MCP
 * server configurations, with a Test button over the same tester as `POST /v1/mcp/test`, edits the
 * operator's model catalog (the same one `--catalog` writes, shared through the database), and shows
 * the fleet (each node's devices and replicas, each catalog model's status) with the operator's
 * actions on it: pin a replica to a node, unpin it, unload a replica, drain a node.
 */
import { Hono } from "hono";
import { usageRange, type UsageLedger } from "../usage/index.js";
import { secureHeaders } from "hono/secure-headers";
import { InvalidRequestError, NotFoundError } from "../../core/errors.js";
import { bearerToken, readJsonBody, staticFiles } from "../../core/http/index.js";
import { existingOr } from "../../core/paths.js";
import { ACCOUNT_NAME_RULE, isValidAccountName, TIERS, type KeyService } from "../auth/index.js";
import { SERVER_TYPES, type McpService } from "../mcp/index.js";
import { parseBody } from "../../core/schema.js";
import { CreateKeyRequest, FleetDrainRequest, FleetPinRequest, FleetUnloadRequest } from "./schema.js";
import type { AgentSnapshot } from "../fleet/index.js";
import type { ModelStatus } from "../catalog/status.js";
import type { ErrorCode } from "../../core/error-codes.js";
import { OperatorCatalogError, parseOperatorCatalog, type OperatorCatalog } from "../../models/operator-catalog.js";
import type { ModelCatalog } from "../catalog/index.js";

/** The static folder: beside this module in the sources, or back in the sources from dist/. */
const STATIC = existingOr(new URL("./static/", import.meta.url), new URL("../../../scheduler/dashboard/static/", import.meta.url));

/**
 * The page and its files: no inline script or style anywhere (CSP without 'unsafe-inline'), never
 * framed, never sniffed, no referrer. HSTS is left to whoever terminates TLS.
 */
const pageHeaders = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'self'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", "data:"],
    connectSrc: ["'self'"],
    objectSrc: ["'none'"],
    baseUri: ["'none'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
  },
  xFrameOptions: "DENY",
  xContentTypeOptions: true,
  referrerPolicy: "no-referrer",
  strictTransportSecurity: false,
});

export interface DashboardDeps {
  keys: KeyService;
  /** MCP configurations, secrets and tests: the same service as `/v1/mcp`, for any account. */
  mcp: McpService;
  adminToken?: string;
  /** Largest accepted JSON body, in bytes. */
  maxBodyBytes: number;
  /** The usage ledger: any account's usage by day and model. */
  usage: UsageLedger;
  /** The model catalog (`/admin/api/catalog`). */
  catalog: ModelCatalog;
  /** The connected nodes (`GET /admin/api/nodes`, `/admin/api/fleet`) and the operator's actions on them (the fleet's `Fleet`). */
  fleet?: DashboardFleet;
}

/** What the dashboard reads of the fleet and does to it (scheduler/fleet's `Fleet`). */
export interface DashboardFleet {
  snapshot(): AgentSnapshot[];
  /** Drained nodes no longer connected: a node drained for reports past the scheduler's bounds shows why. */
  drainedAway?(): { nodeId: string; distrusted: { reason: string; at: number }; connectedAt: number }[];
  statusOf(model: string): ModelStatus;
  pin(nodeId: string, model: string): Promise<{ state: "loading" | "ready"; loaded: boolean; evicted: string[] }>;
  unpin(nodeId: string, model: string): void;
  unloadReplica(nodeId: string, model: string, force: boolean): { unpinned: boolean; inflight: number };
  drainNode(nodeId: string, deadlineMs: number): boolean;
}

/** How long a drained node's requests may take to finish, unless the request says (s). */
const DEFAULT_DRAIN_S = 60;

export function dashboardRoutes(deps: DashboardDeps): Hono {
  const app = new Hono();
  const serve = staticFiles(STATIC, ["index.html", "dashboard.css", "dashboard.js"]);
  app.use("/dashboard/*", pageHeaders); // also matches /dashboard itself
  app.get("/dashboard", () => serve("index.html")!);
  app.get("/dashboard/:name", (c) => serve(c.req.param("name")) ?? c.notFound());

  if (!deps.adminToken) {
    app.all("/admin/api/*", () => {
      throw new NotFoundError("dashboard_disabled", "path: the dashboard is off (start the scheduler with --admin-token)");
    });
    return app;
  }
  const api = new Hono();
  const wrong: [ErrorCode, string] = ["invalid_admin_token", "Authorization: the admin token is missing or wrong"];
  api.use("*", bearerToken(deps.adminToken, { missing: wrong, invalid: wrong }));
  api.get("/session", (c) => c.json({ tiers: TIERS, server_types: SERVER_TYPES, stdio_servers: deps.mcp.stdioServerNames() }));
  api.get("/accounts", async (c) => {
    const byAccount = new Map<string, { name: string; tier: string; keys: unknown[] }>();
    for (const k of await deps.keys.list()) {
      const entry = byAccount.get(k.account) ?? { name: k.account, tier: k.tier, keys: [] };
      const state = k.revokedAt ? "revoked" : k.expiresAt && k.expiresAt * 1000 < Date.now() ? "expired" : "active";
      entry.keys.push({ id: k.keyId, tier: k.tier, rpm: k.rpm, created_at: k.createdAt, expires_at: k.expiresAt, state });
      byAccount.set(k.account, entry);
    }
    return c.json({ data: [...byAccount.values()] });
  });
  // The connected nodes: their pools, what the scheduler observed of them, and whether one was drained for its reports;
  // then the drained nodes no longer connected (bounded by the fleet), so a drained node that left still shows.
  api.get("/nodes", (c) =>
    c.json({
      data: [
        ...(deps.fleet?.snapshot() ?? []).map((a) => ({
          node_id: a.nodeId,
          connected: true,
          connected_at: a.connectedAt,
          draining: a.draining,
          distrusted: a.distrusted ?? null,
          models: [...new Set(a.pools.flatMap((p) => p.modelIds))],
          slots: a.pools.reduce((n, p) => n + p.slots, 0),
          inflight: a.observed.inflight,
          ttft_ms: a.observed.ttftMs ?? null,
          tokens_per_second: a.observed.tokensPerSecond ?? null,
        })),
        ...(deps.fleet?.drainedAway?.() ?? []).map((a) => ({
          node_id: a.nodeId,
          connected: false,
          connected_at: a.connectedAt,
          draining: true,
          distrusted: a.distrusted,
          models: [],
          slots: 0,
          inflight: 0,
          ttft_ms: null,
          tokens_per_second: null,
        })),
      ],
    }),
  );
  api.post("/keys", async (c) => {
    const { account, tier, rpm } = parseBody(CreateKeyRequest, await readJsonBody(c, deps.maxBodyBytes));
    return c.json(await deps.keys.create({ account, tier, ...(rpm ? { rpm } : {}) }), 201);
  });
  api.delete("/keys/:id", async (c) => {
    if (!(await deps.keys.revoke(c.req.param("id")))) throw new NotFoundError("key_not_found", `key_id: no active key "${c.req.param("id")}"`);
    return c.body(null, 204);
  });
  const account = (c: { req: { param(name: "account"): string } }) => {
    const name = c.req.param("account");
    if (!isValidAccountName(name)) throw new InvalidRequestError("invalid_account", `account: ${ACCOUNT_NAME_RULE}`);
    return name;
  };
  api.get("/accounts/:account/mcp", async (c) => c.json({ data: await deps.mcp.list(account(c)) }));
  api.post("/accounts/:account/mcp", async (c) => c.json(await deps.mcp.create(account(c), await readJsonBody(c, deps.maxBodyBytes)), 201));
  api.put("/accounts/:account/mcp/:id", async (c) => c.json(await deps.mcp.update(account(c), c.req.param("id"), await readJsonBody(c, deps.maxBodyBytes))));
  api.delete("/accounts/:account/mcp/:id", async (c) => {
    await deps.mcp.delete(account(c), c.req.param("id"));
    return c.body(null, 204);
  });
  // An account's usage by day and model, as GET /v1/usage reports it to the account's keys.
  api.get("/accounts/:account/usage", async (c) => {
    const { from, to } = usageRange(c.req.query("start_date"), c.req.query("end_date"));
    return c.json({ object: "list", account: account(c), start_date: from, end_date: to, data: await deps.usage.report(account(c), from, to) });
  });
  api.post("/accounts/:account/mcp/:id/test", async (c) => c.json(await deps.mcp.test(account(c), c.req.param("id"))));
  // An account's secrets: names listed, values only ever written.
  api.get("/accounts/:account/secrets", async (c) => c.json({ data: await deps.mcp.listSecrets(account(c)) }));
  api.put("/accounts/:account/secrets/:name", async (c) => c.json(await deps.mcp.setSecret(account(c), c.req.param("name"), await readJsonBody(c, deps.maxBodyBytes))));
  api.delete("/accounts/:account/secrets/:name", async (c) => {
    await deps.mcp.deleteSecret(account(c), c.req.param("name"));
    return c.body(null, 204);
  });
  // The operator's model catalog, whole: read, replaced (checked as a --catalog file is: a 400 names the entry and
  // the field), or removed (back to the built-in ids). Last write wins; every scheduler on the database takes it up.
  const catalog = () => ({
    active: deps.catalog.active,
    version: deps.catalog.version,
    updated_at: deps.catalog.updatedAt > 0 ? Math.floor(deps.catalog.updatedAt / 1000) : null,
    models: deps.catalog.entries,
  });
  api.get("/catalog", (c) => c.json(catalog()));
  api.put("/catalog", async (c) => {
    const body = await readJsonBody(c, deps.maxBodyBytes);
    let parsed: OperatorCatalog;
    try {
      parsed = parseOperatorCatalog(body);
    } catch (err) {
      if (err instanceof OperatorCatalogError) throw new InvalidRequestError("invalid_catalog", err.message, err.field);
      throw err;
    }
    await deps.catalog.replace(parsed);
    return c.json(catalog());
  });
  api.delete("/catalog", async (c) => {
    await deps.catalog.replace(undefined);
    return c.body(null, 204);
  });
  // The fleet page: each node with its devices (free memory as placement counts it) and replicas, each catalog model's
  // status and replicas; and the operator's actions: pin a replica to a node (loaded there if it has none), unpin,
  // unload, drain a node. Pins are this scheduler's, in its memory (docs/operations.md).
  const fleetView = () => {
    const nodes = deps.fleet?.snapshot() ?? [];
    const count = (model: string, ready: boolean) =>
      nodes.reduce(
        (n, a) =>
          n +
          (a.placeable
            ? a.replicas.filter((r) => r.model === model && (ready ? r.state === "ready" : r.state !== "unloading")).length
            : a.pools.filter((p) => p.modelIds.includes(model)).length),
        0,
      );
    return {
      catalog_active: deps.catalog.active,
      nodes: nodes.map((a) => ({
        node_id: a.nodeId,
        connected_at: a.connectedAt,
        placeable: a.placeable,
        draining: a.draining,
        distrusted: a.distrusted ?? null,
        devices: a.devices.map((d) => ({ name: d.name, total_bytes: d.totalBytes, free_bytes: d.freeBytes })),
        replicas: a.replicas.map((r) => ({
          model: r.model,
          state: r.state,
          progress: r.progress,
          bytes: r.bytes,
          inflight: r.inflight,
          slots: r.slots,
          last_used_at: r.lastUsedAt,
          pinned: r.pinned,
        })),
        pools: a.pools.map((p) => ({ models: p.modelIds, slots: p.slots, inflight: p.inflight })),
      })),
      models: deps.catalog.entries.map((m) => ({
        id: m.id,
        aliases: m.aliases,
        status: deps.fleet?.statusOf(m.id) ?? "unavailable",
        replicas: count(m.id, false),
        ready: count(m.id, true),
        min_replicas: m.min_replicas,
        max_replicas: m.max_replicas,
      })),
    };
  };
  const fleet = (): DashboardFleet => {
    if (!deps.fleet) throw new NotFoundError("node_not_found", "node: this scheduler has no fleet");
    return deps.fleet;
  };
  /** A request's model as the fleet knows it: an alias's id (anything else as it came, for the fleet to refuse). */
  const canonical = (model: string) => deps.catalog.resolve(model)?.id ?? model;
  api.get("/fleet", (c) => c.json(fleetView()));
  api.post("/fleet/pins", async (c) => {
    const { model, node } = parseBody(FleetPinRequest, await readJsonBody(c, deps.maxBodyBytes));
    const id = canonical(model);
    const pinned = await fleet().pin(node, id);
    return c.json({ node, model: id, pinned: true, state: pinned.state, evicted: pinned.evicted }, pinned.loaded ? 202 : 200);
  });
  api.delete("/fleet/pins", async (c) => {
    const { model, node } = parseBody(FleetPinRequest, await readJsonBody(c, deps.maxBodyBytes));
    fleet().unpin(node, canonical(model));
    return c.body(null, 204);
  });
  api.post("/fleet/unload", async (c) => {
    const { model, node, force } = parseBody(FleetUnloadRequest, await readJsonBody(c, deps.maxBodyBytes));
    const id = canonical(model);
    const done = fleet().unloadReplica(node, id, force ?? false);
    return c.json({ node, model: id, state: "unloading", unpinned: done.unpinned, inflight: done.inflight }, 202);
  });
  api.post("/fleet/nodes/:id/drain", async (c) => {
    // the body is optional: none (or an empty one) drains with the default deadline
    const length = c.req.header("content-length");
    const empty = length === "0" || (length === undefined && c.req.header("transfer-encoding") === undefined);
    const { deadline_s } = parseBody(FleetDrainRequest, empty ? {} : await readJsonBody(c, deps.maxBodyBytes));
    const deadline = deadline_s ?? DEFAULT_DRAIN_S;
    const node = c.req.param("id");
    const ordered = fleet().drainNode(node, deadline * 1000);
    return c.json({ node, draining: true, deadline_s: deadline, already: !ordered }, 202);
  });
  app.route("/admin/api", api);
  return app;
}

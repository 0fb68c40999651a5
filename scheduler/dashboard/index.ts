/**
 * The dashboard: a static page at `/dashboard` and its admin API under `/admin/api`, behind the
 * admin token (`--admin-token` / `KILN_ADMIN_TOKEN`; without one the dashboard is off). It lists
 * accounts and keys, creates keys (shown once) and revokes them, and manages each account's MCP
 * server configurations, with a Test button over the same tester as `POST /v1/mcp/test`.
 */
import { Hono } from "hono";
import { InvalidRequestError, NotFoundError } from "../../core/errors.js";
import { bearerToken, readJsonBody, staticFiles } from "../../core/http/index.js";
import { existingOr } from "../../core/paths.js";
import { isTier, TIERS, type KeyService } from "../auth/index.js";
import { SERVER_TYPES, testMcpServer, validateMcpConfig, type McpStore } from "../mcp/index.js";

/** The static folder: beside this module in the sources, or back in the sources from dist/. */
const STATIC = existingOr(new URL("./static/", import.meta.url), new URL("../../../scheduler/dashboard/static/", import.meta.url));

export interface DashboardDeps {
  keys: KeyService;
  mcp: McpStore;
  adminToken?: string;
  mcpTestTimeoutMs: number;
  /** Largest accepted JSON body, in bytes. */
  maxBodyBytes: number;
}

export function dashboardRoutes(deps: DashboardDeps): Hono {
  const app = new Hono();
  const serve = staticFiles(STATIC, ["index.html", "dashboard.css", "dashboard.js"]);
  app.get("/dashboard", () => serve("index.html")!);
  app.get("/dashboard/:name", (c) => serve(c.req.param("name")) ?? c.notFound());

  if (!deps.adminToken) {
    app.all("/admin/api/*", () => { throw new NotFoundError("dashboard_disabled", "path: the dashboard is off (start the scheduler with --admin-token)"); });
    return app;
  }
  const api = new Hono();
  const wrong: [string, string] = ["invalid_admin_token", "Authorization: the admin token is missing or wrong"];
  api.use("*", bearerToken(deps.adminToken, { missing: wrong, invalid: wrong }));
  api.get("/session", (c) => c.json({ tiers: TIERS, server_types: SERVER_TYPES }));
  api.get("/accounts", (c) => {
    const byAccount = new Map<string, { name: string; tier: string; keys: unknown[] }>();
    for (const k of deps.keys.list()) {
      const entry = byAccount.get(k.account) ?? { name: k.account, tier: k.tier, keys: [] };
      const state = k.revokedAt ? "revoked" : k.expiresAt && k.expiresAt * 1000 < Date.now() ? "expired" : "active";
      entry.keys.push({ id: k.keyId, tier: k.tier, rpm: k.rpm, created_at: k.createdAt, expires_at: k.expiresAt, state });
      byAccount.set(k.account, entry);
    }
    return c.json({ data: [...byAccount.values()] });
  });
  api.post("/keys", async (c) => {
    const body = await readJsonBody(c, deps.maxBodyBytes) as Record<string, unknown>;
    const account = typeof body?.account === "string" ? body.account.trim() : "";
    if (!/^[\w.@-]{1,64}$/.test(account)) throw new InvalidRequestError("invalid_account", "account: 1–64 letters, digits, _ . @ or -");
    const tier = String(body.tier ?? "");
    if (!isTier(tier)) throw new InvalidRequestError("invalid_tier", `tier: one of ${TIERS.join(", ")}`);
    const rpm = body.rpm === undefined || body.rpm === "" || body.rpm === null ? undefined : Number(body.rpm);
    if (rpm !== undefined && !(Number.isInteger(rpm) && rpm > 0)) throw new InvalidRequestError("invalid_rpm", "rpm: a whole number of at least 1");
    if (tier === "enterprise" && rpm === undefined) throw new InvalidRequestError("invalid_rpm", "rpm: required for the enterprise tier");
    return c.json(await deps.keys.create({ account, tier, ...(rpm ? { rpm } : {}) }), 201);
  });
  api.delete("/keys/:id", (c) => {
    if (!deps.keys.revoke(c.req.param("id"))) throw new NotFoundError("key_not_found", `key_id: no active key "${c.req.param("id")}"`);
    return c.body(null, 204);
  });
  const owned = (account: string, id: string) => {
    const s = deps.mcp.get(account, id);
    if (!s) throw new NotFoundError("mcp_server_not_found", `server_id: no MCP server "${id}" in account ${account}`);
    return s;
  };
  api.get("/accounts/:account/mcp", (c) => c.json({ data: deps.mcp.list(c.req.param("account")) }));
  api.post("/accounts/:account/mcp", async (c) => c.json(deps.mcp.create(c.req.param("account"), validateMcpConfig(await readJsonBody(c, deps.maxBodyBytes))), 201));
  api.put("/accounts/:account/mcp/:id", async (c) => {
    owned(c.req.param("account"), c.req.param("id"));
    return c.json(deps.mcp.update(c.req.param("account"), c.req.param("id"), validateMcpConfig(await readJsonBody(c, deps.maxBodyBytes))));
  });
  api.delete("/accounts/:account/mcp/:id", (c) => {
    owned(c.req.param("account"), c.req.param("id"));
    deps.mcp.delete(c.req.param("account"), c.req.param("id"));
    return c.body(null, 204);
  });
  api.post("/accounts/:account/mcp/:id/test", async (c) => c.json(await testMcpServer(owned(c.req.param("account"), c.req.param("id")), deps.mcpTestTimeoutMs)));
  app.route("/admin/api", api);
  return app;
}

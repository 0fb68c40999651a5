/**
 * MCP under `/v1/mcp` (Standard tier and above): `POST /test {server_id}` (the spec's endpoint),
 * and the configurations of the key's account, which the dashboard manages:
 * `GET /servers`, `POST /servers`, `GET|PUT|DELETE /servers/{id}`.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { NotFoundError, PermissionError } from "../../../core/errors.js";
import { tierAtLeast } from "../../auth/index.js";
import { readJsonBody } from "../../../core/http/index.js";
import { jsonObject, missingField, wrongType } from "../../../core/validate.js";
import { testMcpServer, validateMcpConfig, type McpStore } from "../../mcp/index.js";
import type { AppEnv } from "../env.js";

const standardTier: MiddlewareHandler<AppEnv> = async (c, next) => {
  const { tier } = c.get("identity");
  if (!tierAtLeast(tier, "standard")) throw new PermissionError("tier_too_low", `Authorization: MCP needs the standard tier or above; this key's account is ${tier}`);
  await next();
};

export function mcpRoutes(store: McpStore, testTimeoutMs: number, maxBodyBytes: number): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", standardTier);
  const owned = (account: string, id: string) => {
    const server = store.get(account, id);
    if (!server) throw new NotFoundError("mcp_server_not_found", `server_id: no MCP server "${id}" in this account`);
    return server;
  };

  app.post("/test", async (c) => {
    const id = jsonObject(await readJsonBody(c, maxBodyBytes)).server_id;
    if (id === undefined || id === null || id === "") missingField("server_id");
    if (typeof id !== "string") wrongType("server_id", "a string", id);
    return c.json(await testMcpServer(owned(c.get("identity").account, id), testTimeoutMs));
  });
  app.get("/servers", (c) => c.json({ object: "list", data: store.list(c.get("identity").account) }));
  app.post("/servers", async (c) => c.json(store.create(c.get("identity").account, validateMcpConfig(await readJsonBody(c, maxBodyBytes))), 201));
  app.get("/servers/:id", (c) => c.json(owned(c.get("identity").account, c.req.param("id"))));
  app.put("/servers/:id", async (c) => {
    const account = c.get("identity").account;
    owned(account, c.req.param("id"));
    return c.json(store.update(account, c.req.param("id"), validateMcpConfig(await readJsonBody(c, maxBodyBytes))));
  });
  app.delete("/servers/:id", (c) => {
    const account = c.get("identity").account;
    owned(account, c.req.param("id"));
    store.delete(account, c.req.param("id"));
    return c.body(null, 204);
  });
  return app;
}

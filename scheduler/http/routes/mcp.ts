/**
 * MCP under `/v1/mcp` (Standard tier and above), all within the key's account:
 * `POST /test {server_id}`; the configurations, `GET|POST /servers`, `GET|PUT|DELETE /servers/{id}`;
 * and the account's secrets that configurations name, write-only: `GET /secrets` (names only),
 * `PUT /secrets/{name} {value}`, `DELETE /secrets/{name}`.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { PermissionError } from "../../../core/errors.js";
import { tierAtLeast } from "../../auth/index.js";
import { readJsonBody } from "../../../core/http/index.js";
import { parseBody } from "../../../core/schema.js";
import { McpTestRequest, type McpService } from "../../mcp/index.js";
import type { AppEnv } from "../env.js";

const standardTier: MiddlewareHandler<AppEnv> = async (c, next) => {
  const { tier } = c.get("identity");
  if (!tierAtLeast(tier, "standard")) throw new PermissionError("tier_too_low", `Authorization: MCP needs the standard tier or above; this key's account is ${tier}`);
  await next();
};

export function mcpRoutes(mcp: McpService, maxBodyBytes: number): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", standardTier);
  const account = (c: { get(key: "identity"): { account: string } }) => c.get("identity").account;

  app.post("/test", async (c) => {
    const { server_id: id } = parseBody(McpTestRequest, await readJsonBody(c, maxBodyBytes));
    return c.json(await mcp.test(account(c), id, c.get("requestId")));
  });
  app.get("/servers", async (c) => c.json({ object: "list", data: await mcp.list(account(c)) }));
  app.post("/servers", async (c) => c.json(await mcp.create(account(c), await readJsonBody(c, maxBodyBytes)), 201));
  app.get("/servers/:id", async (c) => c.json(await mcp.get(account(c), c.req.param("id"))));
  app.put("/servers/:id", async (c) => c.json(await mcp.update(account(c), c.req.param("id"), await readJsonBody(c, maxBodyBytes))));
  app.delete("/servers/:id", async (c) => {
    await mcp.delete(account(c), c.req.param("id"));
    return c.body(null, 204);
  });
  app.get("/secrets", async (c) => c.json({ object: "list", data: await mcp.listSecrets(account(c)) }));
  app.put("/secrets/:name", async (c) => c.json(await mcp.setSecret(account(c), c.req.param("name"), await readJsonBody(c, maxBodyBytes))));
  app.delete("/secrets/:name", async (c) => {
    await mcp.deleteSecret(account(c), c.req.param("name"));
    return c.body(null, 204);
  });
  return app;
}

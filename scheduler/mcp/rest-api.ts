/**
 * The `rest_api` integration as an MCP server: one tool per configured endpoint, calling
 * `base_url` + path through the egress guard with the configured authentication (the account's
 * secrets, read at use). Path parameters (`/users/{id}`) come from the tool's `params`; a call can
 * never leave the configured origin.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { readCapped, scopedFetch, type ConnectContext } from "./context.js";
import type { SecretReader } from "./secrets.js";

/** The most of a response a tool call hands back. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

export interface RestApiConfig {
  base_url: string;
  endpoints: { name: string; method: string; path: string; description?: string }[];
  authentication?: { type: string; key_env?: string; header?: string; prefix?: string; token_env?: string; bot_token_env?: string; username?: string; password_env?: string };
  permissions?: { read_only?: boolean };
}

/** The request headers the authentication asks for; throws naming a variable that is not set. */
function authHeaders(auth: RestApiConfig["authentication"], env: SecretReader): Record<string, string> {
  if (!auth) return {};
  switch (auth.type) {
    case "api_key":
      return { [auth.header ?? "Authorization"]: `${auth.prefix ?? ""}${env(auth.key_env)}` };
    case "token":
      return { Authorization: `Bearer ${env(auth.token_env)}` };
    case "oauth":
      return auth.bot_token_env ? { Authorization: `Bearer ${env(auth.bot_token_env)}` } : {};
    case "credentials":
      return { Authorization: `Basic ${Buffer.from(`${auth.username ?? ""}:${env(auth.password_env)}`).toString("base64")}` };
    default:
      return {};
  }
}

/** base_url + path with `{name}` placeholders filled (URI-encoded); refuses another origin. */
export function endpointUrl(base: string, path: string, params: Record<string, string> = {}, query: Record<string, string> = {}): URL {
  const filled = path.replace(/\{(\w+)\}/g, (_, k: string) => {
    if (params[k] === undefined) throw new Error(`params.${k} is required by ${path}`);
    return encodeURIComponent(params[k]);
  });
  const baseUrl = new URL(base);
  const url = new URL(`${baseUrl.pathname.replace(/\/$/, "")}${filled}`, baseUrl);
  if (url.origin !== baseUrl.origin) throw new Error(`${path} leaves ${baseUrl.origin}`);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  return url;
}

export function createRestApiServer(config: RestApiConfig, ctx: ConnectContext): McpServer {
  const fetch = scopedFetch(ctx);
  const server = new McpServer({ name: "kiln-rest-api", version: "1.0.0" });
  for (const ep of config.endpoints) {
    const writes = ep.method !== "GET";
    if (writes && config.permissions?.read_only) continue; // read-only exposes GET endpoints only
    server.registerTool(
      ep.name,
      {
        description: ep.description ?? `${ep.method} ${ep.path}`,
        inputSchema: { params: z.record(z.string(), z.string()).optional(), query: z.record(z.string(), z.string()).optional(), body: z.unknown().optional() },
        annotations: { readOnlyHint: !writes },
      },
      async ({ params, query, body }) => {
        try {
          const url = endpointUrl(config.base_url, ep.path, params, query);
          const res = await fetch(url, {
            method: ep.method,
            headers: { accept: "application/json", ...authHeaders(config.authentication, ctx.secret), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
            ...(body !== undefined && writes ? { body: JSON.stringify(body) } : {}),
          });
          const { text, truncated } = await readCapped(res, MAX_RESPONSE_BYTES);
          return {
            isError: !res.ok,
            content: [{ type: "text" as const, text: `${res.status} ${res.statusText}\n${text}${truncated ? `\n[cut at ${MAX_RESPONSE_BYTES} bytes]` : ""}` }],
          };
        } catch (err) {
          return { isError: true, content: [{ type: "text" as const, text: err instanceof Error ? err.message : String(err) }] };
        }
      },
    );
  }
  return server;
}

/** Checks that the API answers at all (any HTTP status) through the egress guard; throws otherwise. */
export async function probeRestApi(config: RestApiConfig, ctx: ConnectContext): Promise<void> {
  const res = await scopedFetch(ctx)(config.base_url, { method: "HEAD" });
  await res.body?.cancel().catch(() => undefined);
}

/**
 * MCP server configurations (SPEC.md, "MCP server configuration"): `{name, description?,
 * server_type, config}`, validated per `server_type`. Secrets are only ever named by `*_env`
 * members: a configuration that holds a secret value itself (a password, token, key or client
 * secret; credentials inside a URL) is refused with a 400 naming the member.
 */
import { z } from "zod";
import { InvalidRequestError } from "../../core/errors.js";
import { jsonObject, wrongType } from "../../core/validate.js";

export const SERVER_TYPES = ["github", "slack", "postgresql", "mysql", "mongodb", "rest_api", "filesystem", "websocket", "mcp"] as const;
export type ServerType = (typeof SERVER_TYPES)[number];

const envName = z.string().regex(/^[A-Z_][A-Z0-9_]*$/, "must name an environment variable (A-Z, 0-9, _)");
const url = (protocols: string[]) => z.string().refine((v) => {
  try {
    return protocols.includes(new URL(v).protocol);
  } catch {
    return false;
  }
}, `must be a ${protocols.join(" or ")} URL`);
const stringList = z.array(z.string());

const authentication = z.discriminatedUnion("type", [
  z.object({ type: z.literal("oauth"), client_id: z.string().optional(), client_secret_env: envName.optional(), bot_token_env: envName.optional(), scopes: stringList.optional(), redirect_uri: url(["http:", "https:"]).optional() }),
  z.object({ type: z.literal("api_key"), key_env: envName, header: z.string().min(1).optional(), prefix: z.string().optional() }),
  z.object({ type: z.literal("credentials"), username: z.string().min(1), password_env: envName, ssl_required: z.boolean().optional() }),
  z.object({ type: z.literal("app"), app_id: z.union([z.string(), z.number()]), private_key_env: envName, installation_id: z.union([z.string(), z.number()]) }),
  z.object({ type: z.literal("token"), token_env: envName }),
]);

const permissions = z.object({
  read_only: z.boolean().optional(),
  max_results: z.number().int().positive().optional(),
  allowed_schemas: stringList.optional(),
  allowed_tables: stringList.optional(),
  allowed_collections: stringList.optional(),
  row_limit: z.number().int().positive().optional(),
  document_limit: z.number().int().positive().optional(),
  query_timeout: z.number().int().positive().optional(),
  allowed_extensions: stringList.optional(),
  max_file_size: z.number().int().positive().optional(),
});

const resources = z.object({
  repositories: stringList.optional(),
  channels: stringList.optional(),
  include_issues: z.boolean().optional(),
  include_prs: z.boolean().optional(),
  include_commits: z.boolean().optional(),
  include_private: z.boolean().optional(),
  include_forks: z.boolean().optional(),
  include_dms: z.boolean().optional(),
  include_files: z.boolean().optional(),
  history_limit: z.number().int().positive().optional(),
});

const connection = z.object({
  host: z.string().min(1).optional(),
  port: z.number().int().min(1).max(65535).optional(),
  database: z.string().min(1).optional(),
  ssl_mode: z.enum(["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]).optional(),
  uri: z.string().min(1).optional(),
  options: z.record(z.string(), z.unknown()).optional(),
}).refine((c) => c.uri || c.host, "needs host (and port, database) or uri");

const common = { authentication: authentication.optional(), permissions: permissions.optional(), tools: stringList.optional() };

export const CONFIG_SCHEMAS: Record<ServerType, z.ZodType> = {
  github: z.object({ ...common, authentication, base_url: url(["https:", "http:"]).optional(), resources: resources.optional() }),
  slack: z.object({ ...common, authentication, base_url: url(["https:", "http:"]).optional(), resources: resources.optional() }),
  postgresql: z.object({ ...common, connection }),
  mysql: z.object({ ...common, connection }),
  mongodb: z.object({ ...common, connection }),
  rest_api: z.object({
    ...common,
    base_url: url(["https:", "http:"]),
    endpoints: z.array(z.object({ name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "1–64 letters, digits, _ or -"), method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]), path: z.string().startsWith("/"), description: z.string().optional() })).min(1),
  }),
  filesystem: z.object({
    ...common,
    root_path: z.string().startsWith("/", "must be an absolute path"),
    indexing: z.object({ enable_search: z.boolean().optional(), index_content: z.boolean().optional(), update_interval: z.number().int().positive().optional() }).optional(),
  }),
  websocket: z.object({
    ...common,
    url: url(["ws:", "wss:"]),
    subscription: z.object({ topics: stringList.min(1), buffer_size: z.number().int().positive().optional(), max_age: z.number().int().positive().optional() }),
  }),
  mcp: z.object({
    ...common,
    transport: z.enum(["stdio", "http"]),
    command: z.string().min(1).optional(),
    args: stringList.optional(),
    env_from: z.record(z.string(), envName).optional(),
    url: url(["https:", "http:"]).optional(),
  }).refine((c) => (c.transport === "stdio" ? Boolean(c.command) : Boolean(c.url)), "stdio needs command; http needs url"),
};

export interface McpServerConfig {
  name: string;
  description?: string;
  server_type: ServerType;
  config: Record<string, unknown>;
}

/** Member names that hold a secret when they carry a value (the `_env` twin names it instead). */
const SECRET_MEMBER = /^(password|passwd|secret|client_secret|token|bot_token|access_token|api_key|key|private_key|credentials?)$/i;

/** The path of the first member holding a secret value, if any. */
function findInlinedSecret(value: unknown, path = "config"): string | undefined {
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const found = findInlinedSecret(v, `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  if (!value || typeof value !== "object") {
    if (typeof value === "string" && /^[a-z][a-z0-9+.-]*:\/\/[^/@\s]*:[^/@\s]+@/i.test(value)) return path; // user:password@ in a URL
    return undefined;
  }
  for (const [k, v] of Object.entries(value)) {
    if (SECRET_MEMBER.test(k) && v !== null && v !== undefined && v !== "") return `${path}.${k}`;
    const found = findInlinedSecret(v, `${path}.${k}`);
    if (found) return found;
  }
  return undefined;
}

/** Validates a configuration body; throws a 400 naming the offending member. */
export function validateMcpConfig(body: unknown): McpServerConfig {
  const b = jsonObject(body);
  if (typeof b.name !== "string" || !b.name.trim()) throw new InvalidRequestError("missing_required_field", "name: required (a non-empty string)");
  if (b.description !== undefined && typeof b.description !== "string") wrongType("description", "a string", b.description);
  if (typeof b.server_type !== "string" || !(SERVER_TYPES as readonly string[]).includes(b.server_type)) {
    throw new InvalidRequestError("invalid_server_type", `server_type: expected one of ${SERVER_TYPES.join(", ")}`);
  }
  if (!b.config || typeof b.config !== "object" || Array.isArray(b.config)) throw new InvalidRequestError("missing_required_field", "config: required (an object)");
  const secret = findInlinedSecret(b.config);
  if (secret) throw new InvalidRequestError("inlined_secret", `${secret}: holds a secret value; name an environment variable with its *_env twin instead`);
  const type = b.server_type as ServerType;
  const parsed = CONFIG_SCHEMAS[type].safeParse(b.config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const member = ["config", ...issue.path.map(String)].join(".");
    throw new InvalidRequestError("invalid_config", `${member}: ${issue.message}`);
  }
  return { name: b.name.trim(), ...(typeof b.description === "string" ? { description: b.description } : {}), server_type: type, config: b.config as Record<string, unknown> };
}

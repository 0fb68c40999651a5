/**
 * MCP server configurations: `{name, description?, server_type, config}`, validated per
 * `server_type`, and stored as validated (unknown members are refused, not kept). Tenants are
 * hostile, so a configuration can hold:
 * - no secret value: secrets are only ever named by `*_env` members (and `env_from` values), which
 *   name one of the account's own secrets (a password, token, key or client secret, or
 *   credentials inside a URL, is refused with a 400 naming the member);
 * - no program: a stdio `mcp` server is one of the operator's catalog, picked by name;
 * - no absolute path: a filesystem `root_path` is relative to the account's folder;
 * - no `__proto__`, `constructor` or `prototype` member, and at most 64 KB of JSON.
 */
import { z } from "zod";
import { InvalidRequestError } from "../../core/errors.js";
import { jsonObject, wrongType } from "../../core/validate.js";
import { SECRET_NAME } from "./secrets.js";

export const SERVER_TYPES = ["github", "slack", "postgresql", "mysql", "mongodb", "rest_api", "filesystem", "websocket", "mcp"] as const;
export type ServerType = (typeof SERVER_TYPES)[number];

const envName = z.string().regex(SECRET_NAME, "must name one of the account's secrets (A-Z, 0-9, _; at most 128)");
const url = (protocols: string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    `must be a ${protocols.join(" or ")} URL`,
  );
const stringList = z.array(z.string());

const authentication = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("oauth"),
    client_id: z.string().optional(),
    client_secret_env: envName.optional(),
    bot_token_env: envName.optional(),
    scopes: stringList.optional(),
    redirect_uri: url(["http:", "https:"]).optional(),
  }),
  z.strictObject({ type: z.literal("api_key"), key_env: envName, header: z.string().min(1).optional(), prefix: z.string().optional() }),
  z.strictObject({ type: z.literal("credentials"), username: z.string().min(1), password_env: envName, ssl_required: z.boolean().optional() }),
  z.strictObject({ type: z.literal("app"), app_id: z.union([z.string(), z.number()]), private_key_env: envName, installation_id: z.union([z.string(), z.number()]) }),
  z.strictObject({ type: z.literal("token"), token_env: envName }),
]);

const permissions = z.strictObject({
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

const resources = z.strictObject({
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

const connectionFields = {
  host: z
    .string()
    .min(1)
    .max(253)
    .refine((h) => !h.startsWith("/"), "must be a host name or address (no socket paths)")
    .optional(),
  port: z.number().int().min(1).max(65535).optional(),
  database: z.string().min(1).optional(),
  ssl_mode: z.enum(["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]).optional(),
  uri: z.string().min(1).optional(),
};

/** A connection for a driver whose URIs use `schemes`: host (and port, database) or one URI without query parameters (they can name socket paths and files on the scheduler). */
const connection = (schemes: string[]) =>
  z
    .strictObject(connectionFields)
    .refine((c) => c.uri || c.host, "needs host (and port, database) or uri")
    .superRefine((c, ctx) => {
      if (!c.uri) return;
      let u: URL | undefined;
      try {
        u = new URL(c.uri);
      } catch {
        /* reported below */
      }
      if (!u || !schemes.includes(u.protocol)) ctx.addIssue({ code: "custom", path: ["uri"], message: `must be a ${schemes.map((p) => `${p}//`).join(" or ")} URI` });
      else if (!u.hostname || u.hostname.includes(",")) ctx.addIssue({ code: "custom", path: ["uri"], message: "must name exactly one host" });
      else if (u.search) ctx.addIssue({ code: "custom", path: ["uri"], message: "query parameters are not accepted (use connection.ssl_mode)" });
    });

const common = { authentication: authentication.optional(), permissions: permissions.optional(), tools: stringList.optional() };

export const CONFIG_SCHEMAS: Record<ServerType, z.ZodType> = {
  github: z.strictObject({ ...common, authentication, base_url: url(["https:", "http:"]).optional(), resources: resources.optional() }),
  slack: z.strictObject({ ...common, authentication, base_url: url(["https:", "http:"]).optional(), resources: resources.optional() }),
  postgresql: z.strictObject({ ...common, connection: connection(["postgres:", "postgresql:"]) }),
  mysql: z.strictObject({ ...common, connection: connection(["mysql:"]) }),
  mongodb: z.strictObject({ ...common, connection: connection(["mongodb:"]) }),
  rest_api: z.strictObject({
    ...common,
    base_url: url(["https:", "http:"]),
    endpoints: z
      .array(
        z.strictObject({
          name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "1–64 letters, digits, _ or -"),
          method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
          path: z.string().startsWith("/"),
          description: z.string().optional(),
        }),
      )
      .min(1),
  }),
  filesystem: z.strictObject({
    ...common,
    root_path: z
      .string()
      .max(1024)
      .refine(
        (p) => !p.startsWith("/") && !p.includes("\0") && !p.split(/[\\/]/).includes(".."),
        'must be a path relative to the account\'s folder, without .. ("" or "." is the folder itself)',
      ),
    indexing: z.strictObject({ enable_search: z.boolean().optional(), index_content: z.boolean().optional(), update_interval: z.number().int().positive().optional() }).optional(),
  }),
  websocket: z.strictObject({
    ...common,
    url: url(["ws:", "wss:"]),
    subscription: z.strictObject({
      topics: z.array(z.string().max(256)).min(1).max(50),
      buffer_size: z.number().int().positive().max(1000).optional(),
      max_age: z.number().int().positive().optional(),
    }),
  }),
  mcp: z.discriminatedUnion("transport", [
    z.strictObject({
      ...common,
      transport: z.literal("stdio"),
      /** The operator's catalog entry to start (`--mcp-stdio-servers`). */
      server: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must name one of the operator's stdio servers"),
      /** The server's variables (those its catalog entry lets tenants fill) → the account's secret names. */
      env_from: z.record(z.string().regex(/^[A-Z_][A-Z0-9_]{0,127}$/, "must name an environment variable (A-Z, 0-9, _)"), envName).optional(),
    }),
    z.strictObject({ ...common, transport: z.literal("http"), url: url(["https:", "http:"]) }),
  ]),
};

/**
 * The body of a configuration as the OpenAPI document shows it: the per-type `config` schemas above,
 * under the members validateMcpConfig checks first (name, description, server_type).
 */
export const McpServerConfigBody = z
  .object({
    name: z.string().min(1).max(200),
    description: z.string().optional(),
    server_type: z.enum(SERVER_TYPES),
    config: z
      .union(Object.values(CONFIG_SCHEMAS) as [z.ZodType, ...z.ZodType[]])
      .meta({ description: "The server type's configuration. Secrets are named by *_env members (the account's secrets), never inlined." }),
  })
  .meta({ id: "McpServerConfig" });

export interface McpServerConfig {
  name: string;
  description?: string;
  server_type: ServerType;
  config: Record<string, unknown>;
}

/** Member names that hold a secret when they carry a value (the `_env` twin names it instead). */
const SECRET_MEMBER = /^(password|passwd|secret|client_secret|token|bot_token|access_token|api_key|key|private_key|credentials?)$/i;

/** A member of a parsed JSON value: its path (`config.endpoints[0].name`), its key, its value and its parent's path. */
interface Member {
  path: string;
  key: string;
  value: unknown;
  parent: string;
}

/** Every member of a parsed JSON value, depth first, each before its own members. */
function* members(value: unknown, path = "config"): Generator<Member> {
  if (!value || typeof value !== "object") return;
  for (const [key, v] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${path}[${key}]` : `${path}.${key}`;
    yield { path: at, key, value: v, parent: path };
    yield* members(v, at);
  }
}

/** The path of the first member that `test` holds for, if any. */
function firstMember(value: unknown, test: (m: Member) => boolean): string | undefined {
  for (const m of members(value)) if (test(m)) return m.path;
  return undefined;
}

/** `user:password@` in a URL. */
const URL_CREDENTIALS = /^[a-z][a-z0-9+.-]*:\/\/[^/@\s]*:[^/@\s]+@/i;

/** The path of the first member holding a secret value (a secret-named member with a value, or credentials in a URL), if any. */
const findInlinedSecret = (config: unknown) =>
  firstMember(
    config,
    (m) => (SECRET_MEMBER.test(m.key) && m.value !== null && m.value !== undefined && m.value !== "") || (typeof m.value === "string" && URL_CREDENTIALS.test(m.value)),
  );

/** Largest stored configuration, as JSON. */
export const MAX_CONFIG_BYTES = 64 * 1024;

/** Members that could reach an object's prototype wherever a configuration is walked or merged. */
const FORBIDDEN_MEMBER = new Set(["__proto__", "constructor", "prototype"]);

/** The path of the first forbidden member, if any. */
const findForbiddenMember = (config: unknown) => firstMember(config, (m) => FORBIDDEN_MEMBER.has(m.key));

/** Every secret a configuration names: `*_env` members and `env_from` values, with their paths. */
export function secretReferences(config: unknown): { path: string; name: string }[] {
  return [...members(config)]
    .filter((m) => typeof m.value === "string" && (m.key.endsWith("_env") || m.parent.endsWith(".env_from")))
    .map((m) => ({ path: m.path, name: m.value as string }));
}

/** What validation needs to know about this scheduler. */
export interface McpValidationContext {
  /** Names of the operator's stdio servers and the variables each lets tenants fill. */
  stdioServers: Record<string, { tenant_env: string[] }>;
  /** Whether `filesystem` configurations can run (`--mcp-fs-base` is set). */
  filesystem: boolean;
  /** The account's secret names: every secret a configuration names must be one of them. */
  secrets: string[];
}

/** Validates a configuration body; throws a 400 naming the offending member. Returns what is stored. */
export function validateMcpConfig(body: unknown, context: McpValidationContext): McpServerConfig {
  const b = jsonObject(body);
  if (typeof b.name !== "string" || !b.name.trim()) throw new InvalidRequestError("missing_required_field", "name: required (a non-empty string)");
  if (b.name.length > 200) throw new InvalidRequestError("invalid_value", "name: at most 200 characters");
  if (b.description !== undefined && typeof b.description !== "string") wrongType("description", "a string", b.description);
  if (typeof b.server_type !== "string" || !(SERVER_TYPES as readonly string[]).includes(b.server_type)) {
    throw new InvalidRequestError("invalid_server_type", `server_type: expected one of ${SERVER_TYPES.join(", ")}`);
  }
  if (!b.config || typeof b.config !== "object" || Array.isArray(b.config)) throw new InvalidRequestError("missing_required_field", "config: required (an object)");
  const size = Buffer.byteLength(JSON.stringify(b));
  if (size > MAX_CONFIG_BYTES) throw new InvalidRequestError("config_too_large", `config: ${size} bytes of JSON; a configuration holds at most ${MAX_CONFIG_BYTES}`);
  const forbidden = findForbiddenMember(b.config);
  if (forbidden) throw new InvalidRequestError("invalid_config", `${forbidden}: this member name is not accepted`);
  const secret = findInlinedSecret(b.config);
  if (secret) throw new InvalidRequestError("inlined_secret", `${secret}: holds a secret value; store it as one of the account's secrets and name it with the member's *_env twin`);
  const type = b.server_type as ServerType;
  const raw = b.config as Record<string, unknown>;
  if (type === "mcp" && (raw.command !== undefined || raw.args !== undefined)) {
    const names = Object.keys(context.stdioServers);
    throw new InvalidRequestError(
      "invalid_config",
      `config.${raw.command !== undefined ? "command" : "args"}: tenants cannot run programs on the scheduler; pick one of the operator's stdio servers with config.server (${names.length ? `available: ${names.join(", ")}` : "this scheduler offers none; use transport http"})`,
    );
  }
  const parsed = CONFIG_SCHEMAS[type].safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const member = ["config", ...issue.path.map(String), ...(issue.code === "unrecognized_keys" ? [issue.keys[0]!] : [])].join(".");
    throw new InvalidRequestError("invalid_config", `${member}: ${issue.code === "unrecognized_keys" ? "not a member of this server type's configuration" : issue.message}`);
  }
  const config = parsed.data as Record<string, unknown>;
  if (type === "filesystem" && !context.filesystem)
    throw new InvalidRequestError("mcp_filesystem_disabled", "server_type: filesystem servers are off on this scheduler (the operator sets --mcp-fs-base to allow them)");
  if (type === "mcp" && config.transport === "stdio") {
    const entry = Object.hasOwn(context.stdioServers, config.server as string) ? context.stdioServers[config.server as string] : undefined;
    if (!entry)
      throw new InvalidRequestError(
        "unknown_stdio_server",
        `config.server: "${String(config.server)}" is not one of the operator's stdio servers (${Object.keys(context.stdioServers).join(", ") || "none"})`,
      );
    for (const variable of Object.keys((config.env_from as Record<string, string> | undefined) ?? {})) {
      if (!entry.tenant_env.includes(variable))
        throw new InvalidRequestError(
          "invalid_config",
          `config.env_from.${variable}: the server "${String(config.server)}" takes no such variable from tenants (it takes: ${entry.tenant_env.join(", ") || "none"})`,
        );
    }
  }
  for (const ref of secretReferences(config)) {
    if (!context.secrets.includes(ref.name))
      throw new InvalidRequestError("unknown_secret", `${ref.path}: this account has no secret named ${ref.name}; set it first (PUT /v1/mcp/secrets/${ref.name})`, ref.path);
  }
  return { name: b.name.trim(), ...(typeof b.description === "string" ? { description: b.description } : {}), server_type: type, config };
}

/**
 * The `postgresql` integration as an MCP server: the allowed schemas' tables (optionally only
 * `allowed_tables`) as resources describing their columns, and a `query` tool that runs one
 * statement with `row_limit` and `query_timeout`, inside a READ ONLY transaction unless the
 * configuration says `read_only: false`. The password is the account's secret named by
 * `password_env`; the server is dialled at the address the egress guard checked.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { Socket } from "node:net";
import pg from "pg";
import { z } from "zod";
import type { ConnectContext } from "./context.js";
import { guardSocket } from "./egress.js";
import { optionalSecret } from "./secrets.js";

/** A relational connection as configured for `postgresql` and `mysql`. */
export interface SqlConfig {
  connection: { host?: string; port?: number; database?: string; ssl_mode?: string; uri?: string };
  authentication?: { type: string; username?: string; password_env?: string };
  permissions?: { read_only?: boolean; allowed_schemas?: string[]; allowed_tables?: string[]; row_limit?: number; query_timeout?: number };
}

const DEFAULT_ROW_LIMIT = 100;
const DEFAULT_QUERY_TIMEOUT_S = 10;
/** The most tables (or collections) listed as resources: a server cannot make the scheduler hold a million. */
export const MAX_LISTED = 1000;
/** The user when a configuration names none (never the scheduler's own `PGUSER` or login). */
const DEFAULT_USER = "kiln";

/** Host, port, database and user of a connection given as fields or as a URI (validated: one host, no query). */
export function connectionTarget(c: SqlConfig["connection"], defaultPort: number): { host: string; port: number; database?: string; user?: string } {
  if (!c.uri) return { host: c.host!, port: c.port ?? defaultPort, ...(c.database ? { database: c.database } : {}) };
  const u = new URL(c.uri);
  const database = decodeURIComponent(u.pathname.replace(/^\//, ""));
  return {
    host: u.hostname,
    port: u.port ? Number(u.port) : (c.port ?? defaultPort),
    ...(database ? { database } : {}),
    ...(u.username ? { user: decodeURIComponent(u.username) } : {}),
  };
}

/**
 * The client's settings, every one given: pg reads whatever is left out from the scheduler's own
 * environment (`PGPASSWORD`, `~/.pgpass`, `PGUSER`, `PGOPTIONS`, `PGSSLMODE`, …), which would hand
 * the operator's credentials to a tenant's server.
 */
async function clientConfig(c: SqlConfig, ctx: ConnectContext): Promise<pg.ClientConfig> {
  const auth = c.authentication;
  const password = optionalSecret(ctx.secret, auth?.password_env);
  const target = connectionTarget(c.connection, 5432);
  const { address } = await ctx.egress.resolve(target.host);
  const mode = c.connection.ssl_mode;
  const ssl =
    mode && !["disable", "allow", "prefer"].includes(mode)
      ? { rejectUnauthorized: mode === "verify-full" || mode === "verify-ca", servername: target.host, ...(mode === "verify-ca" ? { checkServerIdentity: () => undefined } : {}) }
      : false;
  const user = auth?.username ?? target.user ?? DEFAULT_USER;
  return {
    host: address,
    port: target.port,
    // bytes past MAX_UPSTREAM_BYTES, or a message pg's parser throws on, end the connection (with TLS, pg reads a socket of its own: the sandbox holds that)
    stream: () => guardSocket(new Socket()),
    database: target.database ?? user,
    user,
    password: () => password ?? "", // a function: pg never falls back to PGPASSWORD or a pgpass file
    options: "",
    ssl,
    connectionTimeoutMillis: ctx.timeoutMs,
    query_timeout: ctx.timeoutMs,
    application_name: "kiln-mcp",
  };
}

/**
 * A client made while the scheduler's `PG*` variables are out of sight: pg fills any setting left
 * empty from them (`PGOPTIONS`, `PGSSLMODE`, …), and an empty string counts as left out. pg reads
 * them in the constructor, synchronously, so nothing else runs while they are hidden.
 */
function withoutPgEnvironment(config: pg.ClientConfig): pg.Client {
  const hidden = Object.entries(process.env).filter(([k]) => k.startsWith("PG"));
  for (const [k] of hidden) delete process.env[k];
  try {
    return new pg.Client(config);
  } finally {
    for (const [k, v] of hidden) process.env[k] = v;
  }
}

export async function createPostgresServer(config: SqlConfig, ctx: ConnectContext): Promise<McpServer> {
  const client = withoutPgEnvironment(await clientConfig(config, ctx));
  client.on("error", () => undefined); // a dropped connection fails the next query, not the scheduler
  ctx.defer(() => {
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    return client.end();
  });
  await client.connect();
  const p = config.permissions ?? {};
  const schemas = p.allowed_schemas?.length ? p.allowed_schemas : ["public"];
  const rowLimit = p.row_limit ?? DEFAULT_ROW_LIMIT;
  const timeoutS = p.query_timeout ?? DEFAULT_QUERY_TIMEOUT_S;
  const readOnly = p.read_only !== false;
  const tables = (
    await client.query<{ table_schema: string; table_name: string }>(
      `SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema = ANY($1) ORDER BY 1, 2 LIMIT ${MAX_LISTED}`,
      [schemas],
    )
  ).rows.filter((t) => !p.allowed_tables?.length || p.allowed_tables.includes(t.table_name) || p.allowed_tables.includes(`${t.table_schema}.${t.table_name}`));

  const server = new McpServer({ name: "kiln-postgresql", version: "1.0.0" });
  for (const t of tables) {
    const name = `${t.table_schema}.${t.table_name}`;
    server.registerResource(
      name,
      `postgres://${config.connection.host ?? "db"}/${config.connection.database ?? ""}/${t.table_schema}/${t.table_name}`,
      { mimeType: "application/json", description: `Columns of ${name}` },
      async (uri) => {
        const cols = await client.query(
          "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
          [t.table_schema, t.table_name],
        );
        return { contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify(cols.rows) }] };
      },
    );
  }
  server.registerTool(
    "query",
    {
      description: `Run one SQL statement${readOnly ? " (read-only)" : ""}; at most ${rowLimit} rows, ${timeoutS} s`,
      inputSchema: { sql: z.string().min(1) },
      annotations: { readOnlyHint: readOnly },
    },
    async ({ sql }) => {
      try {
        await client.query(readOnly ? "BEGIN TRANSACTION READ ONLY" : "BEGIN");
        await client.query(`SET LOCAL statement_timeout = ${Math.round(timeoutS * 1000)}`);
        const result = await client.query(sql);
        await client.query("COMMIT");
        const rows = (result.rows ?? []).slice(0, rowLimit);
        return { content: [{ type: "text" as const, text: JSON.stringify({ rows, row_count: result.rowCount, truncated: (result.rows?.length ?? 0) > rowLimit }) }] };
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        return { isError: true, content: [{ type: "text" as const, text: err instanceof Error ? err.message : String(err) }] };
      }
    },
  );
  return server;
}

/**
 * The `mysql` integration as an MCP server (mysql2): the allowed schemas' tables as resources and
 * a `query` tool with `row_limit` and `query_timeout`, inside a READ ONLY transaction unless the
 * configuration says `read_only: false`. The password is the account's secret named by
 * `password_env`; the server is dialled at the address the egress guard checked.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { connect } from "node:net";
import mysqlCore from "mysql2";
import type mysql from "mysql2/promise";
import { z } from "zod";
import type { ConnectContext } from "./context.js";
import { guardSocket } from "./egress.js";
import { optionalSecret } from "./secrets.js";
import { connectionTarget, MAX_LISTED, type SqlConfig } from "./sql.js";

export async function createMysqlServer(config: SqlConfig, ctx: ConnectContext): Promise<McpServer> {
  const auth = config.authentication;
  const password = optionalSecret(ctx.secret, auth?.password_env);
  const target = connectionTarget(config.connection, 3306);
  const { address } = await ctx.egress.resolve(target.host);
  const user = auth?.username ?? target.user;
  // The checked address is dialled; the name stays the TLS identity.
  const raw = mysqlCore.createConnection({
    host: target.host,
    port: target.port,
    stream: () => guardSocket(connect(target.port, address)), // held to MAX_UPSTREAM_BYTES; a packet mysql2's parser throws on ends the connection
    ...(target.database ? { database: target.database } : {}),
    ...(user ? { user } : {}),
    ...(password !== undefined ? { password } : {}),
    connectTimeout: ctx.timeoutMs,
    ...(config.connection.ssl_mode && config.connection.ssl_mode !== "disable" ? { ssl: {} } : {}),
  });
  raw.on("error", () => undefined);
  ctx.defer(() => raw.destroy());
  await new Promise<void>((resolve, reject) => raw.connect((err) => (err ? reject(err) : resolve())));
  const conn = raw.promise();
  const p = config.permissions ?? {};
  const schemas = p.allowed_schemas?.length ? p.allowed_schemas : [config.connection.database ?? ""];
  const rowLimit = p.row_limit ?? 100;
  const timeoutS = p.query_timeout ?? 10;
  const readOnly = p.read_only !== false;
  const [tables] = await conn.query<mysql.RowDataPacket[]>(
    { sql: `SELECT table_schema AS s, table_name AS t FROM information_schema.tables WHERE table_schema IN (?) ORDER BY 1, 2 LIMIT ${MAX_LISTED}`, timeout: ctx.timeoutMs },
    [schemas],
  );
  const allowed = tables.filter((r) => !p.allowed_tables?.length || p.allowed_tables.includes(String(r.t)) || p.allowed_tables.includes(`${r.s}.${r.t}`));

  const server = new McpServer({ name: "kiln-mysql", version: "1.0.0" });
  for (const r of allowed) {
    const name = `${r.s}.${r.t}`;
    server.registerResource(name, `mysql://${config.connection.host ?? "db"}/${r.s}/${r.t}`, { mimeType: "application/json", description: `Columns of ${name}` }, async (uri) => {
      const [cols] = await conn.query(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
        [r.s, r.t],
      );
      return { contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify(cols) }] };
    });
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
        await conn.query(readOnly ? "START TRANSACTION READ ONLY" : "START TRANSACTION");
        const [rows] = await conn.query({ sql, timeout: timeoutS * 1000 });
        await conn.query("COMMIT");
        const list = Array.isArray(rows) ? rows.slice(0, rowLimit) : rows;
        return { content: [{ type: "text" as const, text: JSON.stringify({ rows: list, truncated: Array.isArray(rows) && rows.length > rowLimit }) }] };
      } catch (err) {
        await conn.query("ROLLBACK").catch(() => undefined);
        return { isError: true, content: [{ type: "text" as const, text: err instanceof Error ? err.message : String(err) }] };
      }
    },
  );
  return server;
}

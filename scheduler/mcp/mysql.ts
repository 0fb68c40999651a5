/**
 * The `mysql` integration as an MCP server (mysql2): the allowed schemas' tables as resources and
 * a `query` tool with `row_limit` and `query_timeout`, inside a READ ONLY transaction unless the
 * configuration says `read_only: false`. The password comes from `password_env` at use.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import mysql from "mysql2/promise";
import { z } from "zod";
import { optionalSecretFromEnv } from "./secrets.js";
import type { SqlConfig } from "./sql.js";

export async function createMysqlServer(config: SqlConfig, timeoutMs: number): Promise<{ server: McpServer; close: () => Promise<void> }> {
  const auth = config.authentication;
  const password = optionalSecretFromEnv(auth?.password_env);
  const options: mysql.ConnectionOptions = {
    ...(config.connection.uri ? { uri: config.connection.uri } : { host: config.connection.host, port: config.connection.port ?? 3306, database: config.connection.database }),
    ...(auth?.username ? { user: auth.username } : {}), ...(password !== undefined ? { password } : {}),
    connectTimeout: timeoutMs, ...(config.connection.ssl_mode && config.connection.ssl_mode !== "disable" ? { ssl: {} } : {}),
  };
  const conn = await mysql.createConnection(options);
  conn.on("error", () => undefined);
  const p = config.permissions ?? {};
  const schemas = p.allowed_schemas?.length ? p.allowed_schemas : [config.connection.database ?? ""];
  const rowLimit = p.row_limit ?? 100;
  const timeoutS = p.query_timeout ?? 10;
  const readOnly = p.read_only !== false;
  const [tables] = await conn.query<mysql.RowDataPacket[]>("SELECT table_schema AS s, table_name AS t FROM information_schema.tables WHERE table_schema IN (?) ORDER BY 1, 2", [schemas]);
  const allowed = tables.filter((r) => !p.allowed_tables?.length || p.allowed_tables.includes(String(r.t)) || p.allowed_tables.includes(`${r.s}.${r.t}`));

  const server = new McpServer({ name: "kiln-mysql", version: "1.0.0" });
  for (const r of allowed) {
    const name = `${r.s}.${r.t}`;
    server.registerResource(name, `mysql://${config.connection.host ?? "db"}/${r.s}/${r.t}`, { mimeType: "application/json", description: `Columns of ${name}` }, async (uri) => {
      const [cols] = await conn.query("SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position", [r.s, r.t]);
      return { contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify(cols) }] };
    });
  }
  server.registerTool("query", { description: `Run one SQL statement${readOnly ? " (read-only)" : ""}; at most ${rowLimit} rows, ${timeoutS} s`, inputSchema: { sql: z.string().min(1) }, annotations: { readOnlyHint: readOnly } }, async ({ sql }) => {
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
  });
  return { server, close: () => conn.end() };
}

/**
 * The `mongodb` integration as an MCP server (MongoDB's official driver): the allowed
 * collections as resources (a sample document each) and a read-only `find` tool with
 * `document_limit` and `query_timeout`. Credentials come from `password_env` at use, never from
 * the URI (a URI with a password is refused when the configuration is saved).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { MongoClient } from "mongodb";
import { z } from "zod";
import { optionalSecretFromEnv } from "./secrets.js";

export interface MongoConfig {
  connection: { uri?: string; host?: string; port?: number; database?: string };
  authentication?: { type: string; username?: string; password_env?: string };
  permissions?: { allowed_collections?: string[]; document_limit?: number; query_timeout?: number };
}

export async function createMongoServer(config: MongoConfig, timeoutMs: number): Promise<{ server: McpServer; close: () => Promise<void> }> {
  const c = config.connection;
  const uri = c.uri ?? `mongodb://${c.host}:${c.port ?? 27017}/${c.database ?? ""}`;
  const auth = config.authentication;
  const password = optionalSecretFromEnv(auth?.password_env);
  const client = new MongoClient(uri, {
    serverSelectionTimeoutMS: timeoutMs, connectTimeoutMS: timeoutMs,
    ...(auth?.username ? { auth: { username: auth.username, ...(password !== undefined ? { password } : {}) } } : {}),
  });
  await client.connect();
  const db = client.db(c.database);
  const p = config.permissions ?? {};
  const limit = p.document_limit ?? 50;
  const maxTimeMS = (p.query_timeout ?? 10) * 1000;
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((x) => x.name)
    .filter((n) => !p.allowed_collections?.length || p.allowed_collections.includes(n)).sort();

  const server = new McpServer({ name: "kiln-mongodb", version: "1.0.0" });
  for (const name of names) {
    server.registerResource(name, `mongodb://${c.host ?? "db"}/${c.database ?? ""}/${name}`, { mimeType: "application/json", description: `The ${name} collection (a sample document)` }, async (u) => ({
      contents: [{ uri: u.href, mimeType: "application/json", text: JSON.stringify(await db.collection(name).findOne({}, { maxTimeMS })) }],
    }));
  }
  server.registerTool("find", {
    description: `Find documents (read-only; at most ${limit})`,
    inputSchema: { collection: z.enum((names.length ? names : ["(none)"]) as [string, ...string[]]), filter: z.record(z.string(), z.unknown()).optional(), limit: z.number().int().positive().max(limit).optional() },
    annotations: { readOnlyHint: true },
  }, async ({ collection, filter, limit: n }) => {
    try {
      const docs = await db.collection(collection).find(filter ?? {}, { maxTimeMS }).limit(n ?? limit).toArray();
      return { content: [{ type: "text" as const, text: JSON.stringify(docs) }] };
    } catch (err) {
      return { isError: true, content: [{ type: "text" as const, text: err instanceof Error ? err.message : String(err) }] };
    }
  });
  return { server, close: () => client.close() };
}

/**
 * The `mongodb` integration as an MCP server (MongoDB's official driver): the allowed
 * collections as resources (a sample document each) and a read-only `find` tool with
 * `document_limit` and `query_timeout`. The password is the account's secret named by
 * `password_env`, never in the URI (a URI with a password is refused when the configuration is
 * saved). One server, dialled directly through the egress guard: no SRV records and no replica-set
 * discovery, which would let a server send the scheduler to addresses of its choosing.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { MongoClient } from "mongodb";
import { z } from "zod";
import type { ConnectContext } from "./context.js";
import { optionalSecret } from "./secrets.js";
import { connectionTarget, MAX_LISTED } from "./sql.js";

export interface MongoConfig {
  connection: { uri?: string; host?: string; port?: number; database?: string };
  authentication?: { type: string; username?: string; password_env?: string };
  permissions?: { allowed_collections?: string[]; document_limit?: number; query_timeout?: number };
}

export async function createMongoServer(config: MongoConfig, ctx: ConnectContext): Promise<McpServer> {
  const c = config.connection;
  const target = connectionTarget(c, 27017);
  await ctx.egress.resolve(target.host); // refuses IP literals, which the driver dials without a lookup
  const host = target.host.includes(":") ? `[${target.host}]` : target.host;
  const database = target.database ?? c.database;
  const auth = config.authentication;
  const password = optionalSecret(ctx.secret, auth?.password_env);
  const user = auth?.username ?? target.user;
  const client = new MongoClient(`mongodb://${host}:${target.port}/${encodeURIComponent(database ?? "")}`, {
    directConnection: true,
    lookup: ctx.egress.lookup,
    serverSelectionTimeoutMS: ctx.timeoutMs,
    connectTimeoutMS: ctx.timeoutMs,
    socketTimeoutMS: ctx.timeoutMs,
    ...(user ? { auth: { username: user, ...(password !== undefined ? { password } : {}) } } : {}),
  });
  ctx.defer(() => client.close(true));
  await client.connect();
  const db = client.db(database);
  const p = config.permissions ?? {};
  const limit = p.document_limit ?? 50;
  const maxTimeMS = (p.query_timeout ?? 10) * 1000;
  const listed: string[] = [];
  for await (const c of db.listCollections({}, { nameOnly: true })) if (listed.push(c.name) >= MAX_LISTED) break;
  const names = listed.filter((n) => !p.allowed_collections?.length || p.allowed_collections.includes(n)).sort();

  const server = new McpServer({ name: "kiln-mongodb", version: "1.0.0" });
  for (const name of names) {
    server.registerResource(
      name,
      `mongodb://${c.host ?? "db"}/${c.database ?? ""}/${name}`,
      { mimeType: "application/json", description: `The ${name} collection (a sample document)` },
      async (u) => ({
        contents: [{ uri: u.href, mimeType: "application/json", text: JSON.stringify(await db.collection(name).findOne({}, { maxTimeMS })) }],
      }),
    );
  }
  server.registerTool(
    "find",
    {
      description: `Find documents (read-only; at most ${limit})`,
      inputSchema: {
        collection: z.enum((names.length ? names : ["(none)"]) as [string, ...string[]]),
        filter: z.record(z.string(), z.unknown()).optional(),
        limit: z.number().int().positive().max(limit).optional(),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ collection, filter, limit: n }) => {
      try {
        const docs = await db
          .collection(collection)
          .find(filter ?? {}, { maxTimeMS })
          .limit(n ?? limit)
          .toArray();
        return { content: [{ type: "text" as const, text: JSON.stringify(docs) }] };
      } catch (err) {
        return { isError: true, content: [{ type: "text" as const, text: err instanceof Error ? err.message : String(err) }] };
      }
    },
  );
  return server;
}

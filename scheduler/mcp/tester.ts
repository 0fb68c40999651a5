/**
 * `POST /v1/mcp/test`: connects an MCP client (the official SDK) to the server a configuration
 * describes and lists its resources and tools, within a timeout. Integrations Kiln builds itself
 * run in process over a linked in-memory transport; `mcp` servers are reached over stdio or
 * streamable HTTP. Failures are 502s that say what failed.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { UpstreamError } from "../../core/errors.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { MissingSecretError, secretFromEnv } from "./secrets.js";
import { createFilesystemServer, type FilesystemConfig } from "./filesystem.js";
import { createGithubServer, type GithubConfig } from "./github.js";
import { createSlackServer, type SlackConfig } from "./slack.js";
import { createRestApiServer, probeRestApi, type RestApiConfig } from "./rest-api.js";
import { createMongoServer, type MongoConfig } from "./mongodb.js";
import { createMysqlServer } from "./mysql.js";
import { createPostgresServer, type SqlConfig } from "./sql.js";
import { createWebsocketServer, type WebsocketConfig } from "./websocket.js";
import type { StoredMcpServer } from "./store.js";

export interface McpTestResult {
  server_id: string;
  status: "ok";
  resources: { uri: string; name: string; description?: string; mimeType?: string }[];
  tools: { name: string; description?: string; inputSchema?: unknown }[];
  latency_ms: number;
}

interface McpConfig { transport: "stdio" | "http"; command?: string; args?: string[]; env_from?: Record<string, string>; url?: string }

/** The client side of a transport to the configured server (and what to close afterwards). */
async function connectTo(server: StoredMcpServer, timeoutMs: number): Promise<{ transport: Transport; close: () => Promise<void> }> {
  const inProcess = async (mcp: McpServer, close: () => void = () => undefined) => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await mcp.connect(serverSide);
    return { transport: clientSide, close: async () => { close(); await mcp.close(); } };
  };
  switch (server.server_type) {
    case "rest_api": {
      const config = server.config as unknown as RestApiConfig;
      await probeRestApi(config, timeoutMs);
      return inProcess(createRestApiServer(config, timeoutMs));
    }
    case "github":
      return inProcess(await createGithubServer(server.config as unknown as GithubConfig, timeoutMs));
    case "slack":
      return inProcess(await createSlackServer(server.config as unknown as SlackConfig, timeoutMs));
    case "postgresql": {
      const db = await createPostgresServer(server.config as unknown as SqlConfig, timeoutMs);
      return inProcess(db.server, () => void db.close());
    }
    case "mysql": {
      const db = await createMysqlServer(server.config as unknown as SqlConfig, timeoutMs);
      return inProcess(db.server, () => void db.close());
    }
    case "mongodb": {
      const db = await createMongoServer(server.config as unknown as MongoConfig, timeoutMs);
      return inProcess(db.server, () => void db.close());
    }
    case "websocket": {
      const ws = await createWebsocketServer(server.config as unknown as WebsocketConfig, timeoutMs);
      return inProcess(ws.server, ws.close);
    }
    case "filesystem":
      return inProcess(await createFilesystemServer(server.config as unknown as FilesystemConfig));
    case "mcp": {
      const c = server.config as unknown as McpConfig;
      if (c.transport === "http") return { transport: new StreamableHTTPClientTransport(new URL(c.url!)), close: async () => undefined };
      // The server gets PATH and the variables its configuration names, never the scheduler's whole environment.
      const env: Record<string, string> = { PATH: process.env.PATH ?? "" };
      for (const [name, from] of Object.entries(c.env_from ?? {})) env[name] = secretFromEnv(from);
      return { transport: new StdioClientTransport({ command: c.command!, args: c.args ?? [], env, stderr: "ignore" }), close: async () => undefined };
    }
  }
}

export async function testMcpServer(server: StoredMcpServer, timeoutMs: number): Promise<McpTestResult> {
  const started = performance.now();
  const client = new Client({ name: "kiln-mcp-test", version: "1.0.0" });
  let close: () => Promise<void> = async () => undefined;
  let timer: NodeJS.Timeout | undefined;
  const work = (async () => {
    const connection = await connectTo(server, timeoutMs);
    close = connection.close;
    await client.connect(connection.transport);
    const caps = client.getServerCapabilities() ?? {};
    const resources = caps.resources ? (await client.listResources()).resources : [];
    const tools = caps.tools ? (await client.listTools()).tools : [];
    return {
      server_id: server.id,
      status: "ok" as const,
      resources: resources.map((r) => ({ uri: r.uri, name: r.name, ...(r.description ? { description: r.description } : {}), ...(r.mimeType ? { mimeType: r.mimeType } : {}) })),
      tools: tools.map((t) => ({ name: t.name, ...(t.description ? { description: t.description } : {}), inputSchema: t.inputSchema })),
      latency_ms: Math.round(performance.now() - started),
    };
  })();
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new UpstreamError("mcp_timeout", `server_id: ${server.id} (${server.server_type}) did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } catch (err) {
    if (err instanceof UpstreamError) throw err;
    if (err instanceof MissingSecretError) throw new UpstreamError("mcp_misconfigured", `server_id: ${server.id} (${server.server_type}): ${err.message}`);
    throw new UpstreamError("mcp_unreachable", `server_id: ${server.id} (${server.server_type}) failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    clearTimeout(timer);
    work.catch(() => undefined);
    await client.close().catch(() => undefined);
    await close().catch(() => undefined);
  }
}

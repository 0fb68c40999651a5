/**
 * `POST /v1/mcp/test`: connects an MCP client (the official SDK) to the server a configuration
 * describes and lists its resources and tools, within a timeout. Integrations Kiln builds itself
 * run in process over a linked in-memory transport; `mcp` servers are reached over streamable
 * HTTP (through the egress guard) or are one of the operator's stdio servers.
 *
 * Everything a test opens is registered with its scope before it is awaited, and the scope is
 * closed however the test ends (answer, failure, timeout): no socket or process outlives it.
 * Failures are Kiln's own codes — `mcp_egress_denied` (403), `mcp_misconfigured`,
 * `mcp_unreachable`, `mcp_timeout` (502) — and never carry what the upstream server said: that
 * goes to the log, under the request's id.
 */
import { z } from "zod";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { StdioCatalog } from "../../config/index.js";
import { ApiError, UpstreamError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { connectScope, McpConfigProblem, scopedFetch, type ConnectContext } from "./context.js";
import { AnswerTooLargeError, EgressDeniedError, type EgressPolicy } from "./egress.js";
import { createFilesystemServer, PathEscapeError, type FilesystemConfig } from "./filesystem.js";
import type { GithubConfig } from "./github.js";
import type { MongoConfig } from "./mongodb.js";
import { createRestApiServer, probeRestApi, type RestApiConfig } from "./rest-api.js";
import { MissingSecretError, type SecretReader } from "./secrets.js";
import type { SlackConfig } from "./slack.js";
import type { SqlConfig } from "./sql.js";
import { OperatorStdioTransport } from "./stdio.js";
import type { StoredMcpServer } from "./store.js";
import { createWebsocketServer, type WebsocketConfig } from "./websocket.js";

/** `POST /v1/mcp/test`: which of the account's configurations to test. */
export const McpTestRequest = z
  .looseObject({
    server_id: z.string({ error: "a string" }).min(1, { error: "a configuration's id" }).meta({ description: "The id of one of the account's MCP configurations." }),
  })
  .meta({ id: "McpTestRequest" });

export interface McpTestResult {
  server_id: string;
  status: "ok";
  resources: { uri: string; name: string; description?: string; mimeType?: string }[];
  tools: { name: string; description?: string; inputSchema?: unknown }[];
  latency_ms: number;
}

/** What a test needs besides the configuration: the scheduler's MCP settings and the account's secrets. */
export interface McpTestOptions {
  account: string;
  secret: SecretReader;
  egress: EgressPolicy;
  /** The operator's stdio servers. */
  stdioServers: StdioCatalog;
  /** `--mcp-fs-base`; unset: filesystem servers are refused. */
  fsBase?: string;
  timeoutMs: number;
  logger: Logger;
  /** The HTTP request id, for the log line of a failure. */
  requestId?: string;
}

/** 403: a configuration pointed a connection at an address tenants may not reach. */
export class EgressRefusedError extends ApiError {
  constructor(message: string) {
    super(403, "permission_error", "mcp_egress_denied", message);
  }
}

type McpConfig = { transport: "stdio"; server: string; env_from?: Record<string, string> } | { transport: "http"; url: string };

/** The client side of a transport to the configured server; whatever it opens is closed with `ctx`. */
async function connectTo(server: StoredMcpServer, ctx: ConnectContext, options: McpTestOptions): Promise<Transport> {
  const inProcess = async (mcp: McpServer): Promise<Transport> => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    ctx.defer(() => mcp.close());
    await mcp.connect(serverSide);
    return clientSide;
  };
  const config = server.config as never;
  switch (server.server_type) {
    case "rest_api":
      await probeRestApi(config as RestApiConfig, ctx);
      return inProcess(createRestApiServer(config as RestApiConfig, ctx));
    // each integration's client library is loaded the first time a configuration of its type is tested (the scheduler starts without them)
    case "github":
      return inProcess(await (await import("./github.js")).createGithubServer(config as GithubConfig, ctx));
    case "slack":
      return inProcess(await (await import("./slack.js")).createSlackServer(config as SlackConfig, ctx));
    case "postgresql":
      return inProcess(await (await import("./sql.js")).createPostgresServer(config as SqlConfig, ctx));
    case "mysql":
      return inProcess(await (await import("./mysql.js")).createMysqlServer(config as SqlConfig, ctx));
    case "mongodb":
      return inProcess(await (await import("./mongodb.js")).createMongoServer(config as MongoConfig, ctx));
    case "websocket":
      return inProcess(await createWebsocketServer(config as WebsocketConfig, ctx));
    case "filesystem":
      if (!options.fsBase) throw new McpConfigProblem("filesystem servers are off on this scheduler (no --mcp-fs-base)");
      return inProcess(await createFilesystemServer(config as FilesystemConfig, { base: options.fsBase, account: options.account }));
    case "mcp": {
      const c = config as McpConfig;
      if (c.transport === "http") {
        // No reconnection: the SDK would retry a dropped event stream after a delay the server picks, in timers that outlive the test.
        const transport = new StreamableHTTPClientTransport(new URL(c.url), {
          fetch: scopedFetch(ctx),
          reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 0, maxReconnectionDelay: 0, reconnectionDelayGrowFactor: 1 },
        });
        ctx.defer(() => transport.close());
        return transport;
      }
      const spec = Object.hasOwn(options.stdioServers, c.server) ? options.stdioServers[c.server] : undefined;
      if (!spec) throw new McpConfigProblem(`the operator's stdio server "${c.server}" no longer exists`);
      const env: Record<string, string> = {};
      for (const [variable, secret] of Object.entries(c.env_from ?? {})) {
        if (!spec.tenant_env.includes(variable)) throw new McpConfigProblem(`the stdio server "${c.server}" no longer takes ${variable} from tenants`);
        env[variable] = ctx.secret(secret);
      }
      const transport = new OperatorStdioTransport(spec, env);
      ctx.defer(() => transport.close());
      return transport;
    }
  }
}

/** Connects to the server, lists its resources and tools; throws a `ApiError` saying what failed. */
export async function testMcpServer(server: StoredMcpServer, options: McpTestOptions): Promise<McpTestResult> {
  const started = performance.now();
  // The integrations' own socket and query timeouts fire a little before the test's, so a client
  // gives up (and says why) before the test is cut off.
  const { context, close } = connectScope({ egress: options.egress, secret: options.secret, timeoutMs: Math.max(250, options.timeoutMs - 250) });
  const client = new Client({ name: "kiln-mcp-test", version: "1.0.0" });
  context.defer(() => client.close());
  let timer: NodeJS.Timeout | undefined;
  const work = (async (): Promise<McpTestResult> => {
    await client.connect(await connectTo(server, context, options), { signal: context.signal, timeout: options.timeoutMs });
    const caps = client.getServerCapabilities() ?? {};
    const request = { signal: context.signal, timeout: options.timeoutMs };
    const resources = caps.resources ? (await client.listResources(undefined, request)).resources : [];
    const tools = caps.tools ? (await client.listTools(undefined, request)).tools : [];
    return {
      server_id: server.id,
      status: "ok" as const,
      resources: resources.map((r) => ({ uri: r.uri, name: r.name, ...(r.description ? { description: r.description } : {}), ...(r.mimeType ? { mimeType: r.mimeType } : {}) })),
      tools: tools.map((t) => ({ name: t.name, ...(t.description ? { description: t.description } : {}), inputSchema: t.inputSchema })),
      latency_ms: Math.round(performance.now() - started),
    };
  })();
  const what = serverLabel(server);
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeoutError(what, options.timeoutMs)), options.timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } catch (err) {
    throw publicError(err, what, options);
  } finally {
    clearTimeout(timer);
    work.catch(() => undefined);
    await close();
  }
}

/** How a test's messages name the configuration under test: `server_id: mcp_… (postgresql)`. */
export function serverLabel(server: Pick<StoredMcpServer, "id" | "server_type">): string {
  return `server_id: ${server.id} (${server.server_type})`;
}

/** 502: the server did not answer within the test's time. */
export function timeoutError(what: string, ms: number): UpstreamError {
  return new UpstreamError("mcp_timeout", `${what} did not answer within ${ms} ms`);
}

/** 502: the server sent more than `limit` bytes, or reading it took more than `limit` bytes of memory. */
export function tooLargeError(what: string, limit: number, of: "sent" | "memory" = "sent"): UpstreamError {
  const mib = Math.round(limit / 2 ** 20);
  return new UpstreamError(
    "mcp_answer_too_large",
    of === "sent" ? `${what} sent more than ${mib} MiB; the test was stopped` : `${what}: reading the server's answer took more than ${mib} MiB of memory; the test was stopped`,
  );
}

/** 502: what the server sent broke its client, or the process reading it (the details go to the log). */
export function badAnswerError(what: string): UpstreamError {
  return new UpstreamError("mcp_bad_answer", `${what} sent an answer its client could not read; the test was stopped (details are in the scheduler's log under this request's id)`);
}

/** The tenant-facing error for a failure; upstream detail only in the log. */
function publicError(err: unknown, what: string, options: McpTestOptions): ApiError {
  const cause = egressCause(err);
  if (cause) return new EgressRefusedError(`${what}: refused to connect: ${cause.message}`);
  const flood = findCause(err, (e) => (e instanceof AnswerTooLargeError ? e : undefined));
  if (flood) return tooLargeError(what, flood.limit);
  if (err instanceof ApiError) return err;
  if (err instanceof MissingSecretError) return new UpstreamError("mcp_misconfigured", `${what}: ${err.message}`);
  if (err instanceof McpConfigProblem || err instanceof PathEscapeError) return new UpstreamError("mcp_misconfigured", `${what}: ${err.message}`);
  options.logger.warn(
    { requestId: options.requestId, account: options.account, err: err instanceof Error ? { name: err.name, message: err.message } : String(err) },
    "MCP test failed",
  );
  return new UpstreamError("mcp_unreachable", `${what} is unreachable or failed the MCP handshake (details are in the scheduler's log under this request's id)`);
}

/** The first error behind a failure that `pick` recognises, however deep the client library wrapped it. */
function findCause<T>(err: unknown, pick: (e: unknown) => T | undefined, depth = 0): T | undefined {
  const here = pick(err);
  if (here || !err || typeof err !== "object" || depth > 5) return here;
  const e = err as { cause?: unknown; errors?: unknown[]; error?: unknown; reason?: unknown; original?: unknown };
  for (const inner of [e.cause, e.error, e.reason, e.original, ...(Array.isArray(e.errors) ? e.errors : [])]) {
    const found = findCause(inner, pick, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** The `EgressDeniedError` behind a failure. Some clients (the MongoDB driver) keep only the message of the socket's error. */
const egressCause = (err: unknown): EgressDeniedError | undefined =>
  findCause(err, (e) => {
    if (e instanceof EgressDeniedError) return e;
    const host = e instanceof Error ? /(\S+) is not a public address \(loopback, private/.exec(e.message)?.[1] : undefined;
    return host ? new EgressDeniedError(host) : undefined;
  });

/**
 * The `websocket` integration as an MCP server: it connects to `url` (through the egress guard), keeps the last
 * `buffer_size` messages (no older than `max_age` seconds) per subscribed topic, and exposes each
 * topic as a resource plus a `recent_messages` tool. A message belongs to a topic when it is
 * JSON with `topic` (or `channel`) equal to it; with one topic, every message does.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import WebSocket from "ws";
import { z } from "zod";
import type { ConnectContext } from "./context.js";

export interface WebsocketConfig {
  url: string;
  subscription: { topics: string[]; buffer_size?: number; max_age?: number };
}

/** The largest message accepted, and the most text kept across all topics: a server cannot fill the scheduler's memory. */
const MAX_MESSAGE_BYTES = 256 * 1024;
const MAX_BUFFERED = 8 * 1024 * 1024;

export async function createWebsocketServer(config: WebsocketConfig, ctx: ConnectContext): Promise<McpServer> {
  const { topics, buffer_size: size = 100, max_age: maxAge = 3600 } = config.subscription;
  const buffers = new Map(topics.map((t) => [t, [] as { at: number; data: string }[]]));
  let buffered = 0; // characters held across every topic, at most MAX_BUFFERED
  // Through the egress guard; ws follows no redirects unless told to.
  const socket = new WebSocket(config.url, {
    handshakeTimeout: ctx.timeoutMs,
    agent: ctx.egress.agent(config.url.startsWith("wss:")),
    followRedirects: false,
    maxPayload: MAX_MESSAGE_BYTES,
  });
  ctx.defer(() => socket.terminate());
  // Listening before the handshake completes: a server may send as soon as it accepts.
  socket.on("message", (raw) => {
    const data = raw.toString();
    let topic = topics.length === 1 ? topics[0] : undefined;
    try {
      const parsed = JSON.parse(data) as { topic?: unknown; channel?: unknown };
      const named = typeof parsed.topic === "string" ? parsed.topic : typeof parsed.channel === "string" ? parsed.channel : undefined;
      if (named !== undefined) topic = named;
    } catch {
      /* not JSON: the single topic's, if there is one */
    }
    const buffer = topic !== undefined ? buffers.get(topic) : undefined;
    if (!buffer) return;
    buffer.push({ at: Date.now(), data });
    buffered += data.length;
    while (buffer.length && (buffer.length > size || buffered > MAX_BUFFERED)) buffered -= buffer.shift()!.data.length;
  });
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
    // Any other answer than the upgrade (a redirect among them) ends the attempt; a redirect inward is an egress refusal.
    socket.once("unexpected-response", (request, response) => {
      request.destroy();
      const location = response.headers.location;
      const target = location && URL.canParse(location, config.url) ? new URL(location, config.url) : undefined; // none for an address no parser takes (`http://[`)
      const refused = target ? ctx.egress.resolve(target.hostname).then(() => undefined) : Promise.resolve();
      refused.then(() => reject(new Error(`the server answered ${response.statusCode} instead of upgrading (redirects are not followed)`)), reject);
    });
  });
  socket.on("error", () => undefined); // a later failure only empties the buffers; it must not crash the scheduler
  socket.send(JSON.stringify({ type: "subscribe", topics }));
  const recent = (topic: string) => (buffers.get(topic) ?? []).filter((m) => Date.now() - m.at <= maxAge * 1000).map((m) => m.data);

  const server = new McpServer({ name: "kiln-websocket", version: "1.0.0" });
  for (const topic of topics) {
    server.registerResource(
      topic,
      `ws-topic://${encodeURIComponent(topic)}`,
      { mimeType: "application/json", description: `Recent messages on ${topic} from ${config.url}` },
      async (uri) => ({
        contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify(recent(topic)) }],
      }),
    );
  }
  server.registerTool(
    "recent_messages",
    { description: "The buffered messages of a topic, oldest first", inputSchema: { topic: z.enum(topics as [string, ...string[]]) } },
    async ({ topic }) => ({
      content: [{ type: "text" as const, text: JSON.stringify(recent(topic)) }],
    }),
  );
  return server;
}

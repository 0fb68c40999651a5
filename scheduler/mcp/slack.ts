/**
 * The `slack` integration as an MCP server, through Slack's official Web API client: the
 * configured channels as resources (after checking that the token holds the configured `scopes`), `list_channels` (direct messages too with `include_dms`) and
 * `channel_history` (at most `history_limit` messages). The bot token is the account's secret
 * named by `bot_token_env` (or `token_env`); `base_url` points the client elsewhere (Enterprise
 * Grid, tests). Every request goes through the egress guard.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { LogLevel, WebClient, type Logger } from "@slack/web-api";
import { z } from "zod";
import { scopedFetch, type ConnectContext } from "./context.js";

/** The client's own log lines would go to the scheduler's stdout, one per tenant request: none. */
const SILENT: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  setLevel: () => undefined,
  getLevel: () => LogLevel.ERROR,
  setName: () => undefined,
};

export interface SlackConfig {
  base_url?: string;
  authentication: { type: string; bot_token_env?: string; token_env?: string; scopes?: string[] };
  resources?: { channels?: string[]; include_dms?: boolean; history_limit?: number };
}

export async function createSlackServer(c: SlackConfig, ctx: ConnectContext): Promise<McpServer> {
  const token = ctx.secret(c.authentication.bot_token_env ?? c.authentication.token_env);
  const base = c.base_url ?? "https://slack.com/api/";
  const slack = new WebClient(token, {
    slackApiUrl: base.endsWith("/") ? base : `${base}/`,
    fetch: scopedFetch(ctx),
    allowAbsoluteUrls: false,
    timeout: ctx.timeoutMs,
    retryConfig: { retries: 0 },
    // A 429 fails at once (the client would otherwise wait out a server-chosen Retry-After in a timer nothing cancels).
    rejectRateLimitedCalls: true,
    logger: SILENT,
  });
  // The configured scopes must all be granted to the token (Slack reports them on every call).
  const wanted = c.authentication.scopes ?? [];
  if (wanted.length) {
    const granted = (await slack.auth.test()).response_metadata?.scopes ?? [];
    const missing = wanted.filter((s) => !granted.includes(s));
    if (missing.length) throw new Error(`the token lacks the configured scopes ${missing.join(", ")} (granted: ${granted.join(", ") || "none"})`);
  }
  const r = c.resources ?? {};
  const historyLimit = Math.min(1000, r.history_limit ?? 100);
  const list = async () => {
    const res = await slack.conversations.list({ types: r.include_dms ? "public_channel,private_channel,im" : "public_channel,private_channel", limit: 200 });
    return (res.channels ?? []).filter((ch) => !r.channels?.length || r.channels.includes(ch.name ?? "") || ch.is_im);
  };
  const channels = await list(); // proves the token and the address
  const byName = new Map(channels.map((ch) => [ch.name ?? ch.id ?? "", ch.id ?? ""]));
  const text = (v: unknown) => ({ content: [{ type: "text" as const, text: JSON.stringify(v) }] });

  const server = new McpServer({ name: "kiln-slack", version: "1.0.0" });
  for (const ch of channels.filter((x) => x.name)) {
    server.registerResource(
      `#${ch.name}`,
      `slack://channel/${ch.id}`,
      { mimeType: "application/json", description: ch.purpose?.value || `The #${ch.name} channel` },
      async (uri) => ({
        contents: [
          { uri: uri.href, mimeType: "application/json", text: JSON.stringify((await slack.conversations.history({ channel: ch.id!, limit: historyLimit })).messages ?? []) },
        ],
      }),
    );
  }
  server.registerTool("list_channels", { description: "Channels this integration may read" }, async () =>
    text((await list()).map((ch) => ({ id: ch.id, name: ch.name ?? null, is_im: Boolean(ch.is_im) }))),
  );
  server.registerTool(
    "channel_history",
    {
      description: `Recent messages of a channel (at most ${historyLimit})`,
      inputSchema: { channel: z.string().describe("name or id"), limit: z.number().int().positive().max(historyLimit).optional() },
    },
    async ({ channel, limit }) => {
      const id = byName.get(channel.replace(/^#/, "")) ?? channel;
      if (r.channels?.length && ![...byName.values()].includes(id))
        return { isError: true, content: [{ type: "text" as const, text: `channel "${channel}" is not one this integration may read` }] };
      const res = await slack.conversations.history({ channel: id, limit: limit ?? historyLimit });
      return text((res.messages ?? []).map((m) => ({ user: m.user, text: m.text, ts: m.ts })));
    },
  );
  return server;
}

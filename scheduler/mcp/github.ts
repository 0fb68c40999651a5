/**
 * The `github` integration as an MCP server, through Octokit (GitHub's official client):
 * the configured repositories as resources, and tools for what the include flags allow
 * (`list_repositories`, `list_issues`, `list_pull_requests`, `list_commits`). Authentication is
 * a token (`token_env`) or a GitHub App (`app_id`, `private_key_env`, `installation_id`), both
 * the account's secrets; `base_url` points at GitHub Enterprise. Every request goes through the
 * egress guard.
 */
import { createAppAuth } from "@octokit/auth-app";
import { Octokit } from "@octokit/rest";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { scopedFetch, type ConnectContext } from "./context.js";

/** Octokit's own log lines would go to the scheduler's stdout, one per tenant request: none. */
const SILENT = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

export interface GithubConfig {
  base_url?: string;
  authentication: { type: string; token_env?: string; app_id?: string | number; private_key_env?: string; installation_id?: string | number };
  resources?: { repositories?: string[]; include_issues?: boolean; include_prs?: boolean; include_commits?: boolean; include_private?: boolean; include_forks?: boolean };
  permissions?: { max_results?: number };
}

export function githubClient(c: GithubConfig, ctx: ConnectContext): Octokit {
  const a = c.authentication;
  const auth =
    a.type === "app"
      ? { authStrategy: createAppAuth, auth: { appId: a.app_id!, privateKey: ctx.secret(a.private_key_env), installationId: a.installation_id! } }
      : { auth: ctx.secret(a.token_env) };
  return new Octokit({ ...auth, ...(c.base_url ? { baseUrl: c.base_url.replace(/\/$/, "") } : {}), request: { fetch: scopedFetch(ctx) }, userAgent: "kiln-mcp", log: SILENT });
}

export async function createGithubServer(c: GithubConfig, ctx: ConnectContext): Promise<McpServer> {
  const gh = githubClient(c, ctx);
  const r = c.resources ?? {};
  const limit = Math.min(100, c.permissions?.max_results ?? 30);
  const split = (repo: string) => {
    const [owner, name] = repo.split("/");
    if (!owner || !name) throw new Error(`"${repo}" is not owner/name`);
    if (r.repositories?.length && !r.repositories.includes(repo)) throw new Error(`"${repo}" is not one of the configured repositories`);
    return { owner, repo: name };
  };
  const text = (v: unknown) => ({ content: [{ type: "text" as const, text: JSON.stringify(v) }] });
  const failure = (err: unknown) => ({ isError: true, content: [{ type: "text" as const, text: err instanceof Error ? err.message : String(err) }] });

  const server = new McpServer({ name: "kiln-github", version: "1.0.0" });
  for (const full of r.repositories ?? []) {
    const { data } = await gh.repos.get(split(full)); // also proves the credentials and the address
    server.registerResource(full, `github://${full}`, { mimeType: "application/json", description: data.description ?? `The ${full} repository` }, async (uri) => ({
      contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify((await gh.repos.get(split(full))).data) }],
    }));
  }
  const repoArg = { repo: z.string().describe("owner/name") };
  server.registerTool("list_repositories", { description: "Repositories this integration may read" }, async () => {
    try {
      if (r.repositories?.length) return text(r.repositories);
      const { data } = await gh.repos.listForAuthenticatedUser({ per_page: limit });
      return text(data.filter((x) => (r.include_private || !x.private) && (r.include_forks || !x.fork)).map((x) => x.full_name));
    } catch (err) {
      return failure(err);
    }
  });
  if (r.include_issues) {
    server.registerTool("list_issues", { description: "Open issues of a repository", inputSchema: repoArg }, async ({ repo }) => {
      try {
        return text(
          (await gh.issues.listForRepo({ ...split(repo), per_page: limit })).data.filter((i) => !i.pull_request).map((i) => ({ number: i.number, title: i.title, state: i.state })),
        );
      } catch (err) {
        return failure(err);
      }
    });
  }
  if (r.include_prs) {
    server.registerTool("list_pull_requests", { description: "Open pull requests of a repository", inputSchema: repoArg }, async ({ repo }) => {
      try {
        return text((await gh.pulls.list({ ...split(repo), per_page: limit })).data.map((p) => ({ number: p.number, title: p.title, state: p.state })));
      } catch (err) {
        return failure(err);
      }
    });
  }
  if (r.include_commits) {
    server.registerTool("list_commits", { description: "Recent commits of a repository", inputSchema: repoArg }, async ({ repo }) => {
      try {
        return text((await gh.repos.listCommits({ ...split(repo), per_page: limit })).data.map((x) => ({ sha: x.sha, message: x.commit.message })));
      } catch (err) {
        return failure(err);
      }
    });
  }
  return server;
}

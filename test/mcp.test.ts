/**
 * MCP: configuration validation per server type (with the *_env rule), the filesystem
 * integration end to end (escape attempts refused), a standard MCP server over stdio, and the
 * error contract of POST /v1/mcp/test (403, 404, 502 within the timeout).
 */
import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { connectScope, EgressPolicy, createFilesystemServer, createRestApiServer, createWebsocketServer, endpointUrl, validateMcpConfig } from "../scheduler/mcp/index.js";
import { createGithubServer } from "../scheduler/mcp/github.js";
import { createMysqlServer } from "../scheduler/mcp/mysql.js";
import { createSlackServer } from "../scheduler/mcp/slack.js";
import { createPostgresServer } from "../scheduler/mcp/sql.js";
import { isValidAccountName } from "../scheduler/auth/index.js";
import { PathEscapeError } from "../scheduler/mcp/filesystem.js";
import { MissingSecretError } from "../scheduler/mcp/secrets.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessScheduler, tempDir, until } from "./helpers/fleet.js";
import { mariadbBin, postgresBin, startMariadb, startPostgres, type Mariadb, type Postgres } from "./helpers/postgres.js";

/** Calls `/v1/mcp{path}` on a scheduler with a key; `body` is the parsed answer (null for 204). */
async function mcpApi(base: string, key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1/mcp${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: res.status === 204 ? null : await res.json() };
}

/**
 * What an integration gets when a test calls it directly: loopback allowed (the suites' servers
 * listen there), the account's secrets from `secrets`. Close the scope to close what it opened.
 */
function direct(secrets: Record<string, string> = {}, timeoutMs = 5000) {
  const secret = (name: string | undefined): string => {
    if (!name || secrets[name] === undefined) throw new MissingSecretError(name ?? "(none named)");
    return secrets[name];
  };
  return connectScope({ egress: new EgressPolicy({ allow: ["127.0.0.0/8"] }), secret, timeoutMs });
}

/** Sets an account's secret through the API. */
async function setSecret(base: string, key: string, name: string, value: string): Promise<void> {
  expect((await mcpApi(base, key, "PUT", `/secrets/${name}`, { value })).status).toBe(200);
}

/** An MCP client connected to an in-process server over a linked in-memory transport. */
async function client(server: { connect: (t: InMemoryTransport) => Promise<void> }): Promise<Client> {
  const [c, s] = InMemoryTransport.createLinkedPair();
  await server.connect(s);
  const connected = new Client({ name: "t", version: "1" });
  await connected.connect(c);
  return connected;
}

const GOOD: Record<string, Record<string, unknown>> = {
  github: {
    authentication: { type: "app", app_id: 1, private_key_env: "GH_KEY", installation_id: 2 },
    base_url: "https://api.github.com",
    resources: { repositories: ["acme/app"], include_issues: true },
  },
  slack: { authentication: { type: "oauth", bot_token_env: "SLACK_BOT_TOKEN", scopes: ["channels:read"] }, resources: { channels: ["general"], history_limit: 100 } },
  postgresql: {
    connection: { host: "db", port: 5432, database: "app", ssl_mode: "require" },
    authentication: { type: "credentials", username: "ro", password_env: "PG_PASSWORD" },
    permissions: { read_only: true, row_limit: 100, query_timeout: 5 },
  },
  mysql: { connection: { host: "db", port: 3306, database: "app" }, authentication: { type: "credentials", username: "ro", password_env: "MYSQL_PASSWORD" } },
  mongodb: { connection: { uri: "mongodb://db:27017/app" }, permissions: { allowed_collections: ["users"], document_limit: 50 } },
  rest_api: {
    base_url: "https://api.example.com",
    authentication: { type: "api_key", key_env: "API_KEY", header: "Authorization", prefix: "Bearer " },
    endpoints: [{ name: "list_users", method: "GET", path: "/users" }],
  },
  filesystem: { root_path: "docs", permissions: { read_only: true, allowed_extensions: [".md"], max_file_size: 1000 }, indexing: { enable_search: true } },
  websocket: { url: "wss://feed.example.com/ws", subscription: { topics: ["prices"], buffer_size: 100 } },
  mcp: { transport: "stdio", server: "echo", env_from: { ECHO_NAME: "MY_NAME" } },
};

/** What the validation knows of a scheduler: one operator stdio server, filesystem on, the account's secrets. */
const CONTEXT = {
  stdioServers: { echo: { tenant_env: ["ECHO_NAME"] } },
  filesystem: true,
  secrets: ["GH_KEY", "SLACK_BOT_TOKEN", "PG_PASSWORD", "MYSQL_PASSWORD", "API_KEY", "MY_NAME"],
};

describe("MCP configuration validation", () => {
  it.each(Object.entries(GOOD))("accepts a good %s configuration", (server_type, config) => {
    expect(validateMcpConfig({ name: `x-${server_type}`, server_type, config }, CONTEXT)).toMatchObject({ server_type, config });
  });

  it.each([
    [{ server_type: "github", config: GOOD.github }, "name:"],
    [{ name: "a", server_type: "gopher", config: {} }, "server_type:"],
    [{ name: "a", server_type: "filesystem" }, "config:"],
    [{ name: "a", server_type: "filesystem", config: { root_path: "/etc" } }, "config.root_path:"],
    [{ name: "a", server_type: "filesystem", config: { root_path: "docs/../../other-account" } }, "config.root_path:"],
    [{ name: "a", server_type: "filesystem", config: { root_path: "docs", extra: 1 } }, "config.extra:"],
    [{ name: "a", server_type: "filesystem", config: JSON.parse('{"root_path":"docs","permissions":{"constructor":{"prototype":{"x":1}}}}') }, "config.permissions.constructor:"],
    [{ name: "a", server_type: "filesystem", config: JSON.parse('{"root_path":"docs","__proto__":{"polluted":true}}') }, "config.__proto__:"],
    [{ name: "a", server_type: "mongodb", config: { connection: { uri: "mongodb+srv://cluster.example.com/app" } } }, "config.connection.uri:"],
    [{ name: "a", server_type: "postgresql", config: { connection: { uri: "postgres://db/app?host=/var/run/postgresql&sslkey=/etc/shadow" } } }, "config.connection.uri:"],
    [{ name: "a", server_type: "postgresql", config: { connection: { host: "/var/run/postgresql" } } }, "config.connection.host:"],
    [{ name: "a", server_type: "postgresql", config: { connection: { host: "db", port: "5432" } } }, "config.connection.port:"],
    [{ name: "a", server_type: "rest_api", config: { base_url: "ftp://x", endpoints: [{ name: "a", method: "GET", path: "/" }] } }, "config.base_url:"],
    [{ name: "a", server_type: "rest_api", config: { base_url: "https://x", endpoints: [{ name: "a", method: "FETCH", path: "/" }] } }, "config.endpoints.0.method:"],
    [{ name: "a", server_type: "websocket", config: { url: "https://x", subscription: { topics: ["t"] } } }, "config.url:"],
    [{ name: "a", server_type: "github", config: { authentication: { type: "token", token_env: "lower-case" } } }, "config.authentication.token_env:"],
    [{ name: "a", server_type: "mcp", config: { transport: "stdio" } }, "config.server:"],
    [{ name: "a", server_type: "mcp", config: { transport: "stdio", command: "node", args: ["-e", "evil()"] } }, "config.command: tenants cannot run programs"],
    [{ name: "a", server_type: "mcp", config: { transport: "stdio", server: "other" } }, "config.server:"],
    [{ name: "a", server_type: "mcp", config: { transport: "stdio", server: "echo", env_from: { PATH: "MY_NAME" } } }, "config.env_from.PATH:"],
    [
      { name: "a", server_type: "github", config: { authentication: { type: "token", token_env: "KILN_ADMIN_TOKEN" } } },
      "config.authentication.token_env: this account has no secret named KILN_ADMIN_TOKEN",
    ],
  ])("refuses %j naming %s", (body, member) => {
    expect(() => validateMcpConfig(body, CONTEXT)).toThrow(
      expect.objectContaining({ status: 400, message: expect.stringMatching(new RegExp(`^${member.replace(/[.]/g, "\\.")}`)) }),
    );
  });

  it.each([
    [{ authentication: { type: "credentials", username: "u", password: "hunter2" } }, "config.authentication.password"],
    [{ authentication: { type: "oauth", client_secret: "s3cr3t" } }, "config.authentication.client_secret"],
    [{ authentication: { type: "api_key", key: "sk-live-123" } }, "config.authentication.key"],
    [{ authentication: { type: "token", token: "ghp_abc" } }, "config.authentication.token"],
    [{ connection: { uri: "postgres://app:pa55@db/app" } }, "config.connection.uri"],
  ])("refuses an inlined secret (%j) naming %s", (config, member) => {
    expect(() => validateMcpConfig({ name: "a", server_type: "postgresql", config }, CONTEXT)).toThrow(
      expect.objectContaining({ status: 400, code: "inlined_secret", message: expect.stringContaining(`${member}: holds a secret value`) }),
    );
  });
});

// (The filesystem block's own imports; declarations are hoisted, so they may stand here.)

describe("filesystem integration", () => {
  // dir/base/acme/docs is acme's root; dir/outside, dir/base/other and dir/docs must stay out of reach.
  let dir: string;
  let base: string;
  let root: string;
  let outside: string;
  const SECRET = "the secret outside";
  beforeAll(() => {
    dir = tempDir();
    base = join(dir, "base");
    root = join(base, "acme", "docs");
    outside = join(dir, "outside");
    mkdirSync(join(root, "sub"), { recursive: true });
    mkdirSync(join(root, "rw"), { recursive: true });
    mkdirSync(outside, { recursive: true });
    mkdirSync(join(base, "other", "docs"), { recursive: true });
    mkdirSync(join(dir, "docs"), { recursive: true });
    writeFileSync(join(root, "a.txt"), "alpha needle");
    writeFileSync(join(root, "sub", "b.md"), "# beta");
    writeFileSync(join(root, "c.bin"), "binary");
    writeFileSync(join(outside, "outside.txt"), SECRET);
    writeFileSync(join(base, "other", "docs", "theirs.txt"), SECRET);
    writeFileSync(join(dir, "docs", "above.txt"), SECRET);
    symlinkSync(join(outside, "outside.txt"), join(root, "link-out.txt")); // a file outside
    symlinkSync(outside, join(root, "dir-out")); // a folder outside
    symlinkSync(outside, join(base, "acme", "linked")); // root_path through a link
    symlinkSync(outside, join(root, "sub", "inner-link"));
    symlinkSync(outside, join(base, "evil")); // an account folder that is a link
    // In the writable folder: a dangling link and a link to an existing file, both outside.
    symlinkSync(join(outside, "created-by-link.txt"), join(root, "rw", "dangling.txt"));
    symlinkSync(join(outside, "outside.txt"), join(root, "rw", "clobber.txt"));
    symlinkSync(outside, join(root, "rw", "dir-out"));
  });

  type ToolResult = { isError?: boolean; content: { text: string }[] };
  const connect = async (config: Record<string, unknown>, account = "acme") => client(await createFilesystemServer({ root_path: "docs", ...config }, { base, account }));
  const call = async (c: Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as ToolResult;

  it("serves allowed files as resources, hides links, and refuses every escape", async () => {
    const c = await connect({ permissions: { read_only: true, allowed_extensions: [".txt", ".md"] } });
    const names = (await c.listResources()).resources.map((r) => r.name).sort();
    expect(names).toEqual(["a.txt", join("sub", "b.md")]);
    expect((await c.listTools()).tools.map((t) => t.name).sort()).toEqual(["list_files", "read_file", "search_files"]);
    expect((await call(c, "list_files", {})).content[0]!.text.split("\n").sort()).toEqual(["a.txt", join("sub", "b.md")]);
    expect((await call(c, "read_file", { path: "sub/b.md" })).content[0]!.text).toBe("# beta");
    expect((await call(c, "read_file", { path: "./sub//b.md" })).content[0]!.text).toBe("# beta");
    for (const path of [
      "../outside.txt",
      "../../../outside/outside.txt",
      "sub/../../../../outside/outside.txt",
      "../../other/docs/theirs.txt",
      "../../../docs/above.txt",
      "/etc/passwd",
      join(outside, "outside.txt"),
      "\\etc\\passwd",
      "a.txt\0.md",
      "link-out.txt\0",
      "link-out.txt",
      "dir-out/outside.txt",
      "sub/inner-link/outside.txt",
      "c.bin",
    ]) {
      const r = await call(c, "read_file", { path });
      expect(r.isError, JSON.stringify(path)).toBe(true);
      expect(r.content[0]!.text).not.toContain(SECRET);
      if (!path.includes(dir)) expect(r.content[0]!.text, "no server path in the message").not.toContain(dir);
    }
    expect((await call(c, "search_files", { query: "needle" })).content[0]!.text).toBe("a.txt");
    expect((await call(c, "search_files", { query: "secret" })).content[0]!.text).toBe("");
    await c.close();
  });

  it("roots at the account folder for an empty root_path, creating it 0700", async () => {
    const c = await connect({ root_path: "", permissions: { read_only: true, allowed_extensions: [".md"] } });
    expect((await call(c, "list_files", {})).content[0]!.text).toBe(join("docs", "sub", "b.md"));
    await c.close();
    await createFilesystemServer({ root_path: "." }, { base, account: "newcomer" });
    const s = statSync(join(base, "newcomer"));
    expect(s.isDirectory()).toBe(true);
    expect(s.mode & 0o777).toBe(0o700);
    await expect(createFilesystemServer({ root_path: "missing" }, { base, account: "acme" })).rejects.toThrow(/root_path "missing": no such folder/);
  });

  it("refuses a root_path or account that leaves the account's folder", async () => {
    for (const root_path of [
      "..",
      "../other/docs",
      "docs/../../other/docs",
      "../../docs",
      "../../outside",
      "/",
      outside,
      join(base, "other", "docs"),
      "docs\0",
      "linked",
      "docs/sub/inner-link",
      "docs/dir-out",
    ]) {
      await expect(createFilesystemServer({ root_path }, { base, account: "acme" }), JSON.stringify(root_path)).rejects.toBeInstanceOf(PathEscapeError);
    }
    for (const account of ["..", ".", "", "a/b", "../acme", "acme/../other", "/tmp", "a\0b", ".hidden", "x".repeat(65)]) {
      expect(isValidAccountName(account), JSON.stringify(account)).toBe(false);
      await expect(createFilesystemServer({ root_path: "docs", permissions: { read_only: true } }, { base, account }), JSON.stringify(account)).rejects.toBeInstanceOf(
        PathEscapeError,
      );
    }
    // A well-formed name whose folder is a link out of the base.
    await expect(createFilesystemServer({ root_path: "" }, { base, account: "evil" })).rejects.toBeInstanceOf(PathEscapeError);
    for (const account of ["acme", "a.b", "user@example.com", "x_y-z", "A9"]) expect(isValidAccountName(account), account).toBe(true);
    expect(existsSync(join(base, "a")), "nothing created for a/b").toBe(false);
    expect(existsSync(join(base, "..", "acme")), "nothing created above the base").toBe(false);
  });

  it("does not follow a dangling link inside the root to create a file outside", async () => {
    const c = await connect({ root_path: "docs/rw", permissions: { allowed_extensions: [".txt"] } });
    for (const path of ["dangling.txt", "dir-out/new.txt"]) {
      const r = await call(c, "write_file", { path, content: "planted" });
      expect(r.isError, path).toBe(true);
    }
    expect(existsSync(join(outside, "created-by-link.txt"))).toBe(false);
    expect(existsSync(join(outside, "new.txt"))).toBe(false);
    await c.close();
  });

  it("does not write through a link to a file outside", async () => {
    const before = readFileSync(join(outside, "outside.txt"));
    const c = await connect({ root_path: "docs/rw", permissions: { allowed_extensions: [".txt"] } });
    for (const path of ["clobber.txt", "../link-out.txt", "../../../../outside/outside.txt", join(outside, "outside.txt"), "x.txt\0"]) {
      const r = await call(c, "write_file", { path, content: "clobbered" });
      expect(r.isError, JSON.stringify(path)).toBe(true);
    }
    expect(readFileSync(join(outside, "outside.txt")).equals(before)).toBe(true);
    expect(existsSync(join(root, "x.txt"))).toBe(false);
    await c.close();
  });

  it("writes a file inside the root with exactly its bytes, only when not read-only", async () => {
    const c = await connect({ root_path: "docs/rw", permissions: { allowed_extensions: [".txt"] } });
    expect((await c.listTools()).tools.map((t) => t.name)).toContain("write_file");
    const first = "a long first version\n".repeat(20);
    const content = "héllo\r\nwörld ✓ \u{1F525}\n";
    expect((await call(c, "write_file", { path: "new.txt", content: first })).isError).toBeFalsy();
    expect((await call(c, "write_file", { path: "new.txt", content })).isError).toBeFalsy(); // shorter: truncated
    expect(readFileSync(join(root, "rw", "new.txt")).equals(Buffer.from(content, "utf8"))).toBe(true);
    expect((await call(c, "read_file", { path: "new.txt" })).content[0]!.text).toBe(content);
    expect((await call(c, "write_file", { path: "new.md", content: "x" })).isError).toBe(true);
    expect(existsSync(join(root, "rw", "new.md"))).toBe(false);
    await c.close();
    const ro = await connect({ root_path: "docs/rw", permissions: { read_only: true } });
    expect((await ro.listTools()).tools.map((t) => t.name)).not.toContain("write_file");
    await ro.close();
  });
});

describe("POST /v1/mcp/test", () => {
  let scheduler: SchedulerHandle;
  let base: string;
  let standard: string;
  let free: string;
  let fsBase: string;
  let dump: string;
  let grandchildPidFile: string;
  let hogMarker: string;
  beforeAll(async () => {
    const dir = tempDir();
    fsBase = join(dir, "fs");
    dump = join(dir, "echo-env.json");
    grandchildPidFile = join(dir, "grandchild.pid");
    hogMarker = join(dir, "hog-allocated");
    const spawnGrandchild = `const c = require("child_process").spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" }); require("fs").writeFileSync(${JSON.stringify(grandchildPidFile)}, String(c.pid)); setTimeout(() => {}, 60000)`;
    writeFileSync(
      join(dir, "stdio.json"),
      JSON.stringify({
        echo: { command: process.execPath, args: [resolve("test/fixtures/echo-mcp-server.mjs")], env: { ECHO_ENV_DUMP: dump }, tenant_env: ["ECHO_NAME"] },
        silent: { command: process.execPath, args: ["-e", spawnGrandchild] },
        gone: { command: "/nonexistent/mcp-server" },
        hog: {
          command: process.execPath,
          args: [
            "-e",
            `const a = []; for (let i = 0; i < 40; i++) a.push(Buffer.alloc(8 * 1024 * 1024, 1)); require("fs").writeFileSync(${JSON.stringify(hogMarker)}, "allocated 320 MB")`,
          ],
          memory_mb: 128,
        },
      }),
    );
    process.env.KILN_TEST_SCHEDULER_SECRET = "the-schedulers-own-secret-value";
    scheduler = await inProcessScheduler({ mcpTimeout: "2", mcpFsBase: fsBase, mcpStdioServers: join(dir, "stdio.json"), mcpAllowCidr: "127.0.0.1/32" });
    base = httpBase(scheduler);
    standard = (await scheduler.keys.create({ account: "acme", tier: "standard" })).token;
    free = (await scheduler.keys.create({ account: "cheap", tier: "free" })).token;
  });
  afterAll(() => scheduler?.close());

  const call = (key: string, method: string, path: string, body?: unknown) => mcpApi(base, key, method, path, body);

  it("stores a configuration and lists a filesystem server's resources and tools", async () => {
    mkdirSync(join(fsBase, "acme", "docs"), { recursive: true });
    writeFileSync(join(fsBase, "acme", "docs", "readme.md"), "hello");
    const created = await call(standard, "POST", "/servers", { name: "docs", server_type: "filesystem", config: { root_path: "docs", permissions: { read_only: true } } });
    expect(created.status).toBe(201);
    expect((await call(standard, "GET", "/servers")).body.data.map((s: { id: string }) => s.id)).toContain(created.body.id);
    const test = await call(standard, "POST", "/test", { server_id: created.body.id });
    expect(test.status).toBe(200);
    expect(test.body).toMatchObject({ server_id: created.body.id, status: "ok", resources: [{ name: "readme.md" }], latency_ms: expect.any(Number) });
    expect(test.body.tools.map((t: { name: string }) => t.name)).toEqual(["list_files", "read_file", "search_files"]);
    expect(test.body.resources[0].uri).toBe("kiln-fs:///readme.md");
    expect(JSON.stringify(test.body)).not.toContain(fsBase); // nothing of the scheduler's own folders
    expect((await call(standard, "DELETE", `/servers/${created.body.id}`)).status).toBe(204);
  });

  it("starts an operator's stdio server with only its declared variables, in a scratch folder, and the tenant's secret", async () => {
    expect((await call(standard, "PUT", "/secrets/MY_NAME", { value: "kiln" })).status).toBe(200);
    const created = await call(standard, "POST", "/servers", {
      name: "echo",
      server_type: "mcp",
      config: { transport: "stdio", server: "echo", env_from: { ECHO_NAME: "MY_NAME" } },
    });
    expect(created.status).toBe(201);
    const test = await call(standard, "POST", "/test", { server_id: created.body.id });
    expect(test.status).toBe(200);
    expect(test.body.tools.map((t: { name: string }) => t.name)).toEqual(["echo"]);
    expect(test.body.resources).toEqual([{ uri: "memo://greeting", name: "greeting", description: "A fixed greeting", mimeType: "text/plain" }]);
    const started = JSON.parse(readFileSync(dump, "utf8")) as { env: Record<string, string>; cwd: string };
    // Nothing of the scheduler's environment: only the operator's fixed variable, the tenant's secret, and its scratch HOME/TMPDIR.
    expect(Object.keys(started.env).sort()).toEqual(["ECHO_ENV_DUMP", "ECHO_NAME", "HOME", "TMPDIR"]);
    expect(started.env.ECHO_NAME).toBe("kiln");
    expect(JSON.stringify(started.env)).not.toContain("the-schedulers-own-secret-value");
    expect(started.cwd).toBe(started.env.HOME);
    expect(started.cwd).not.toBe(process.cwd());
    expect(existsSync(started.cwd)).toBe(false); // the scratch folder is gone with the server
  });

  it("an operator's stdio server cannot take more memory than its catalog entry gives it", async () => {
    const created = await call(standard, "POST", "/servers", { name: "hog", server_type: "mcp", config: { transport: "stdio", server: "hog" } });
    const test = await call(standard, "POST", "/test", { server_id: created.body.id });
    expect(test.status).toBe(502);
    expect(existsSync(hogMarker)).toBe(false); // 320 MB under a 128 MB data limit: the allocation failed
  });

  it("403 below the standard tier, 404 for an unknown id, 400 for an inlined secret", async () => {
    const low = await call(free, "POST", "/test", { server_id: "mcp_x" });
    expect(low.status).toBe(403);
    expect(low.body.error).toMatchObject({ type: "permission_error", code: "tier_too_low" });
    const missing = await call(standard, "POST", "/test", { server_id: "mcp_unknown" });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ type: "not_found_error", code: "mcp_server_not_found" });
    const secret = await call(standard, "POST", "/servers", { name: "s", server_type: "slack", config: { authentication: { type: "oauth", client_secret: "abc" } } });
    expect(secret.status).toBe(400);
    expect(secret.body.error.message).toMatch(/^config\.authentication\.client_secret:/);
  });

  it.each([
    [{}, "missing_required_field", "server_id: is required"],
    [{ server_id: 5 }, "invalid_type", "server_id: expected a string, got number"],
    [["mcp_x"], "invalid_type", "body: expected a JSON object, got array"],
  ])("400 naming the field for the body %j", async (body, code, message) => {
    const res = await call(standard, "POST", "/test", body);
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ type: "invalid_request_error", code, message, param: message.slice(0, message.indexOf(":")) });
  });

  it("a configuration over --max-body → 413 request_too_large; over 64 KB → 400 config_too_large", async () => {
    const big = await call(standard, "POST", "/servers", { name: "big", server_type: "filesystem", config: { root_path: "a".repeat(5 * 1024 * 1024) } });
    expect(big.status).toBe(413);
    expect(big.body.error).toMatchObject({ type: "invalid_request_error", code: "request_too_large", message: expect.stringMatching(/^body:/) });
    const large = await call(standard, "POST", "/servers", {
      name: "large",
      server_type: "rest_api",
      config: { base_url: "https://api.example.com", endpoints: Array.from({ length: 2000 }, (_, i) => ({ name: `e${i}`, method: "GET", path: `/${"p".repeat(30)}` })) },
    });
    expect(large.status).toBe(400);
    expect(large.body.error).toMatchObject({ code: "config_too_large", message: expect.stringMatching(/^config: \d+ bytes of JSON; a configuration holds at most 65536/) });
  });

  it("502 with a clear message for an unreachable server, a missing secret, and a silent one (its whole process group killed)", async () => {
    const created = await call(standard, "POST", "/servers", { name: "gone", server_type: "mcp", config: { transport: "stdio", server: "gone" } });
    const started = Date.now();
    const test = await call(standard, "POST", "/test", { server_id: created.body.id });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(test.status).toBe(502);
    expect(test.body.error).toMatchObject({ type: "upstream_error" });
    expect(test.body.error.message).toMatch(/^server_id: mcp_\S+ \(mcp\) (is unreachable|did not answer)/);
    expect((await call(standard, "PUT", "/secrets/SOON_GONE", { value: "x" })).status).toBe(200);
    const unset = await call(standard, "POST", "/servers", { name: "nokey", server_type: "github", config: { authentication: { type: "token", token_env: "SOON_GONE" } } });
    expect(unset.status).toBe(201);
    expect((await call(standard, "DELETE", "/secrets/SOON_GONE")).status).toBe(204);
    const misconfigured = await call(standard, "POST", "/test", { server_id: unset.body.id });
    expect(misconfigured.status).toBe(502);
    expect(misconfigured.body.error).toMatchObject({ code: "mcp_misconfigured", message: expect.stringMatching(/secret SOON_GONE is not set for this account/) });
    const hang = await call(standard, "POST", "/servers", { name: "silent", server_type: "mcp", config: { transport: "stdio", server: "silent" } });
    const slow = await call(standard, "POST", "/test", { server_id: hang.body.id });
    expect(slow.status).toBe(502);
    expect(slow.body.error.code).toBe("mcp_timeout");
    const grandchild = Number(readFileSync(grandchildPidFile, "utf8"));
    await until(
      () => {
        try {
          process.kill(grandchild, 0);
          return false;
        } catch {
          return true;
        }
      },
      3000,
      "the server's own child to be killed with its group",
    );
  });
});

describe("rest_api and websocket integrations", () => {
  const seen: { method: string; url: string; auth: string | undefined; body: string }[] = [];
  let api: ReturnType<typeof createServer>;
  let apiBase: string;
  let wss: WebSocketServer;
  let wsUrl: string;
  beforeAll(async () => {
    process.env.KILN_TEST_API_KEY = "test-api-key-value";
    api = createServer((req: IncomingMessage, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d));
      req.on("end", () => {
        seen.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, body });
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ ok: true, url: req.url }));
      });
    });
    await new Promise<void>((r) => api.listen(0, "127.0.0.1", () => r()));
    apiBase = `http://127.0.0.1:${(api.address() as AddressInfo).port}/v1`;
    wss = new WebSocketServer({ port: 0, host: "127.0.0.1" });
    wss.on("connection", (socket) => {
      socket.send(JSON.stringify({ topic: "prices", v: 1 }));
      socket.send(JSON.stringify({ topic: "other", v: 2 }));
    });
    await new Promise<void>((r) => wss.once("listening", () => r()));
    wsUrl = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/feed`;
  });
  afterAll(() => {
    api?.close();
    wss?.close();
  });

  it("rest_api: one tool per endpoint, authentication from the account's secret, paths kept on the origin", async () => {
    const config = {
      base_url: apiBase,
      authentication: { type: "api_key", key_env: "API_KEY", header: "Authorization", prefix: "Bearer " },
      endpoints: [
        { name: "get_user", method: "GET", path: "/users/{id}" },
        { name: "create_user", method: "POST", path: "/users" },
      ],
    };
    const scope = direct({ API_KEY: "test-api-key-value" });
    const c = await client(createRestApiServer(config, scope.context));
    expect((await c.listTools()).tools.map((t) => t.name)).toEqual(["get_user", "create_user"]);
    const got = (await c.callTool({ name: "get_user", arguments: { params: { id: "../admin" } } })) as { isError?: boolean; content: { text: string }[] };
    expect(got.isError).toBeFalsy();
    expect(seen.at(-1)).toMatchObject({ method: "GET", url: "/v1/users/..%2Fadmin", auth: "Bearer test-api-key-value" });
    await c.callTool({ name: "create_user", arguments: { body: { name: "ada" } } });
    expect(seen.at(-1)).toMatchObject({ method: "POST", url: "/v1/users", body: '{"name":"ada"}' });
    await c.close();
    const ro = await client(createRestApiServer({ ...config, permissions: { read_only: true } }, scope.context));
    expect((await ro.listTools()).tools.map((t) => t.name)).toEqual(["get_user"]);
    await ro.close();
    await scope.close();
    expect(() => endpointUrl("http://a.example/v1", "/x/{id}", {})).toThrow(/params\.id/);
  });

  it("websocket: topics as resources and their recent messages", async () => {
    const scope = direct({}, 2000);
    const c = await client(await createWebsocketServer({ url: wsUrl, subscription: { topics: ["prices"], buffer_size: 10 } }, scope.context));
    expect((await c.listResources()).resources.map((r) => r.name)).toEqual(["prices"]);
    await new Promise((r) => setTimeout(r, 100));
    const recent = (await c.callTool({ name: "recent_messages", arguments: { topic: "prices" } })) as { content: { text: string }[] };
    expect(JSON.parse(recent.content[0]!.text)).toEqual([JSON.stringify({ topic: "prices", v: 1 })]);
    await c.close();
    await scope.close();
  });

  it("through POST /v1/mcp/test, and 502 when the target does not answer", async () => {
    const scheduler = await inProcessScheduler({ mcpTimeout: "2", mcpAllowCidr: "127.0.0.1/32" });
    try {
      const key = (await scheduler.keys.create({ account: "int", tier: "pro" })).token;
      const post = (path: string, body: unknown) => mcpApi(httpBase(scheduler), key, "POST", path, body);
      const rest = await post("/servers", { name: "api", server_type: "rest_api", config: { base_url: apiBase, endpoints: [{ name: "ping", method: "GET", path: "/ping" }] } });
      expect((await post("/test", { server_id: rest.body.id })).body.tools.map((t: { name: string }) => t.name)).toEqual(["ping"]);
      const ws = await post("/servers", { name: "feed", server_type: "websocket", config: { url: wsUrl, subscription: { topics: ["prices", "other"] } } });
      expect((await post("/test", { server_id: ws.body.id })).body.resources.map((r: { name: string }) => r.name)).toEqual(["prices", "other"]);
      const dead = await post("/servers", {
        name: "dead",
        server_type: "rest_api",
        config: { base_url: "http://127.0.0.1:9/v1", endpoints: [{ name: "x", method: "GET", path: "/x" }] },
      });
      const failed = await post("/test", { server_id: dead.body.id });
      expect(failed.status).toBe(502);
      expect(failed.body.error).toMatchObject({ code: "mcp_unreachable", message: expect.stringMatching(/is unreachable/) });
      for (const [type, port] of [
        ["mysql", 9],
        ["mongodb", 9],
      ] as const) {
        const created = await post("/servers", { name: type, server_type: type, config: { connection: { host: "127.0.0.1", port, database: "x" } } });
        const started = Date.now();
        const down = await post("/test", { server_id: created.body.id });
        expect(Date.now() - started).toBeLessThan(3500);
        expect(down.status).toBe(502);
        expect(["mcp_unreachable", "mcp_timeout"]).toContain(down.body.error.code);
        expect(down.body.error.message).toMatch(new RegExp(`^server_id: mcp_\\S+ \\(${type}\\)`));
      }
    } finally {
      await scheduler.close();
    }
  });
});

const PG_BIN = postgresBin();
describe.skipIf(!PG_BIN)("postgresql integration (a real PostgreSQL server)", () => {
  let db: Postgres;
  beforeAll(async () => {
    db = await startPostgres(PG_BIN!);
    db.sql(
      "CREATE TABLE users (id serial PRIMARY KEY, name text NOT NULL); INSERT INTO users (name) SELECT 'user' || g FROM generate_series(1, 30) g; CREATE TABLE secrets (v text); CREATE SCHEMA audit; CREATE TABLE audit.log (at timestamptz)",
    );
  }, 60_000);
  afterAll(() => db?.stop());

  it("lists allowed tables as resources, answers a read-only query with row_limit, and refuses a write", async () => {
    const scope = direct({ PG_PASSWORD: "unused-with-trust-auth" });
    const c = await client(
      await createPostgresServer(
        {
          connection: { host: "127.0.0.1", port: db.port, database: "app" },
          authentication: { type: "credentials", username: "postgres", password_env: "PG_PASSWORD" },
          permissions: { read_only: true, allowed_schemas: ["public"], allowed_tables: ["users"], row_limit: 5, query_timeout: 2 },
        },
        scope.context,
      ),
    );
    expect((await c.listResources()).resources.map((r) => r.name)).toEqual(["public.users"]);
    const columns = await c.readResource({ uri: (await c.listResources()).resources[0]!.uri });
    expect(JSON.parse((columns.contents[0] as { text: string }).text).map((col: { column_name: string }) => col.column_name)).toEqual(["id", "name"]);
    const q = async (sql: string) => (await c.callTool({ name: "query", arguments: { sql } })) as { isError?: boolean; content: { text: string }[] };
    const read = JSON.parse((await q("SELECT name FROM users ORDER BY id")).content[0]!.text);
    expect(read).toMatchObject({ rows: [{ name: "user1" }, { name: "user2" }, { name: "user3" }, { name: "user4" }, { name: "user5" }], truncated: true });
    const write = await q("INSERT INTO users (name) VALUES ('mallory')");
    expect(write.isError).toBe(true);
    expect(write.content[0]!.text).toMatch(/read-only transaction/);
    expect(db.sql("SELECT count(*) FROM users").trim()).toBe("30");
    const slow = await q("SELECT pg_sleep(5)");
    expect(slow.isError).toBe(true);
    expect(slow.content[0]!.text).toMatch(/statement timeout/);
    await c.close();
    await scope.close();
  });

  it("through POST /v1/mcp/test", async () => {
    const scheduler = await inProcessScheduler({ mcpAllowCidr: "127.0.0.1/32" });
    try {
      const key = (await scheduler.keys.create({ account: "pg", tier: "enterprise", rpm: 100 })).token;
      const post = async (path: string, body: unknown) => (await mcpApi(httpBase(scheduler), key, "POST", path, body)).body;
      await setSecret(httpBase(scheduler), key, "PG_PASSWORD", "unused-with-trust-auth");
      const created = await post("/servers", {
        name: "app-db",
        server_type: "postgresql",
        config: { connection: { host: "127.0.0.1", port: db.port, database: "app" }, authentication: { type: "credentials", username: "postgres", password_env: "PG_PASSWORD" } },
      });
      const test = await post("/test", { server_id: created.id });
      expect(test.resources.map((r: { name: string }) => r.name)).toEqual(["public.secrets", "public.users"]);
      expect(test.tools.map((t: { name: string }) => t.name)).toEqual(["query"]);
    } finally {
      await scheduler.close();
    }
  });
});
if (!PG_BIN)
  describe.skip("postgresql integration (skipped: no PostgreSQL server binaries; apt-get install postgresql)", () => {
    it("postgres", () => undefined);
  });

describe("github and slack integrations (official clients against local API servers)", () => {
  const auths: string[] = [];
  let server: ReturnType<typeof createServer>;
  let base: string;
  beforeAll(async () => {
    const routes: Record<string, unknown> = {
      "GET /gh/repos/acme/app": { full_name: "acme/app", description: "The app", private: false },
      "GET /gh/repos/acme/app/issues": [
        { number: 1, title: "bug", state: "open" },
        { number: 2, title: "a PR", state: "open", pull_request: {} },
      ],
      "GET /gh/repos/acme/app/pulls": [{ number: 2, title: "a PR", state: "open" }],
      "POST /slack/api/conversations.list": {
        ok: true,
        channels: [
          { id: "C1", name: "general", purpose: { value: "Talk" } },
          { id: "C2", name: "random" },
        ],
      },
      "POST /slack/api/conversations.history": { ok: true, messages: [{ user: "U1", text: "hello", ts: "1.0" }] },
      "POST /slack/api/auth.test": { ok: true, user_id: "B1" },
    };
    server = createServer((req, res) => {
      auths.push(String(req.headers.authorization));
      req.resume();
      req.on("end", () => {
        const body = routes[`${req.method} ${req.url!.split("?")[0]}`];
        res.statusCode = body ? 200 : 404;
        res.setHeader("content-type", "application/json");
        if (req.url!.startsWith("/slack/")) res.setHeader("x-oauth-scopes", "channels:read, channels:history");
        res.end(JSON.stringify(body ?? { message: "Not Found" }));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => server?.close());

  it("github: repositories as resources, tools by include flags, the token from the account's secret, base_url honoured", async () => {
    const scope = direct({ GH_TOKEN: "gh-test-token" }, 2000);
    const c = await client(
      await createGithubServer(
        {
          base_url: `${base}/gh`,
          authentication: { type: "token", token_env: "GH_TOKEN" },
          resources: { repositories: ["acme/app"], include_issues: true, include_prs: true },
        },
        scope.context,
      ),
    );
    expect((await c.listResources()).resources.map((r) => [r.name, r.description])).toEqual([["acme/app", "The app"]]);
    expect((await c.listTools()).tools.map((t) => t.name)).toEqual(["list_repositories", "list_issues", "list_pull_requests"]);
    const issues = (await c.callTool({ name: "list_issues", arguments: { repo: "acme/app" } })) as { content: { text: string }[] };
    expect(JSON.parse(issues.content[0]!.text)).toEqual([{ number: 1, title: "bug", state: "open" }]);
    const other = (await c.callTool({ name: "list_issues", arguments: { repo: "evil/repo" } })) as { isError?: boolean };
    expect(other.isError).toBe(true);
    expect(auths).toContain("token gh-test-token");
    await c.close();
    await scope.close();
  });

  it("slack: configured channels as resources, history within history_limit, the bot token from the account's secret", async () => {
    const scope = direct({ SLACK_TOKEN: "xoxb-test-token" }, 2000);
    const c = await client(
      await createSlackServer(
        {
          base_url: `${base}/slack/api`,
          authentication: { type: "oauth", bot_token_env: "SLACK_TOKEN", scopes: ["channels:read", "channels:history"] },
          resources: { channels: ["general"], history_limit: 10 },
        },
        scope.context,
      ),
    );
    expect((await c.listResources()).resources.map((r) => r.name)).toEqual(["#general"]);
    const history = (await c.callTool({ name: "channel_history", arguments: { channel: "#general" } })) as { content: { text: string }[] };
    expect(JSON.parse(history.content[0]!.text)).toEqual([{ user: "U1", text: "hello", ts: "1.0" }]);
    const refused = (await c.callTool({ name: "channel_history", arguments: { channel: "random" } })) as { isError?: boolean };
    expect(refused.isError).toBe(true);
    expect(auths).toContain("Bearer xoxb-test-token");
    await c.close();
    await expect(
      createSlackServer({ base_url: `${base}/slack/api`, authentication: { type: "oauth", bot_token_env: "SLACK_TOKEN", scopes: ["chat:write"] } }, scope.context),
    ).rejects.toThrow(/lacks the configured scopes chat:write/);
    await scope.close();
  });
});

const MARIADB = mariadbBin();
describe.skipIf(!MARIADB)("mysql integration (a real MariaDB server)", () => {
  let db: Mariadb;
  beforeAll(async () => {
    db = await startMariadb(MARIADB!);
  }, 60_000);
  afterAll(() => db?.stop());

  it("lists tables as resources, answers a read-only query with row_limit, refuses a write", async () => {
    const setup = direct();
    const admin = await client(
      await createMysqlServer(
        { connection: { host: "127.0.0.1", port: db.port }, authentication: { type: "credentials", username: "root" }, permissions: { read_only: false } },
        setup.context,
      ),
    );
    for (const sql of ["CREATE DATABASE app", "CREATE TABLE app.users (id INT PRIMARY KEY, name TEXT)", "INSERT INTO app.users VALUES (1,'a'),(2,'b'),(3,'c')"]) {
      const r = (await admin.callTool({ name: "query", arguments: { sql } })) as { isError?: boolean; content: { text: string }[] };
      expect(r.isError, r.content[0]?.text).toBeFalsy();
    }
    await admin.close();
    await setup.close();

    const scope = direct();
    const c = await client(
      await createMysqlServer(
        {
          connection: { host: "127.0.0.1", port: db.port, database: "app" },
          authentication: { type: "credentials", username: "root" },
          permissions: { read_only: true, row_limit: 2 },
        },
        scope.context,
      ),
    );
    expect((await c.listResources()).resources.map((r) => r.name)).toEqual(["app.users"]);
    const q = async (sql: string) => (await c.callTool({ name: "query", arguments: { sql } })) as { isError?: boolean; content: { text: string }[] };
    expect(JSON.parse((await q("SELECT name FROM users ORDER BY id")).content[0]!.text)).toEqual({ rows: [{ name: "a" }, { name: "b" }], truncated: true });
    const write = await q("INSERT INTO users VALUES (4, 'mallory')");
    expect(write.isError).toBe(true);
    expect(write.content[0]!.text).toMatch(/READ ONLY transaction/i);
    await c.close();
    await scope.close();
  });
});
if (!MARIADB)
  describe.skip("mysql integration (skipped: no MariaDB server; apt-get install mariadb-server)", () => {
    it("mysql", () => undefined);
  });

describe("mcp over streamable HTTP", () => {
  it("lists a standard MCP server's tools through POST /v1/mcp/test", async () => {
    const { McpServer } = await import("@modelcontextprotocol/sdk/server/mcp.js");
    const { StreamableHTTPServerTransport } = await import("@modelcontextprotocol/sdk/server/streamableHttp.js");
    // Stateless: a fresh server and transport per request, as the SDK's examples do.
    const http = createServer(async (req, res) => {
      const mcp = new McpServer({ name: "http-test", version: "1" });
      mcp.registerTool("ping", { description: "Answers pong" }, async () => ({ content: [{ type: "text", text: "pong" }] }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on("close", () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", () => r()));
    const scheduler = await inProcessScheduler({ mcpAllowCidr: "127.0.0.1/32" });
    try {
      const key = (await scheduler.keys.create({ account: "h", tier: "pro" })).token;
      const post = async (path: string, body: unknown) => (await mcpApi(httpBase(scheduler), key, "POST", path, body)).body;
      const created = await post("/servers", {
        name: "remote",
        server_type: "mcp",
        config: { transport: "http", url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp` },
      });
      const test = await post("/test", { server_id: created.id });
      expect(test).toMatchObject({ status: "ok", tools: [{ name: "ping", description: "Answers pong" }], resources: [] });
    } finally {
      await scheduler.close();
      http.close();
    }
  });
});

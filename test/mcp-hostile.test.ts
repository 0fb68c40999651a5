/**
 * The hostile tenant: a standard-tier key tries to make the scheduler run its program, read the
 * operator's or another account's secrets, reach internal hosts, leave its filesystem folder, or
 * leak sockets. Every attempt is refused with Kiln's own error and leaves no trace.
 *
 * Safety net and witness: in this process every outbound socket is checked before it connects.
 * One to an address outside loopback is recorded and never made (no test traffic leaves the
 * machine even if the guard under test were broken), and the suite asserts none was attempted.
 */
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import net, { type AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessScheduler, tempDir, until } from "./helpers/fleet.js";

// --- the witness: every socket this process and the MCP sandboxes open ----------------------------

const witnessLog = join(tempDir(), "witness.log");
writeFileSync(witnessLog, "");
const witness = new URL("./fixtures/socket-witness.mjs", import.meta.url);
const { outside } = (await import(witness.href)) as { outside: string[] };
/** The scheduler's MCP sandboxes load the witness too, and log what it refused. */
/** Every host the witness refused, here and in the sandboxes. */
const refusedHosts = (): string[] => [...outside, ...readFileSync(witnessLog, "utf8").split("\n").filter(Boolean)];
const LOOPBACK = /^(127\.|::1$|::ffff:127\.|localhost$)/;
const sandboxWitness = { mcpSandboxExecArgv: [`--import=${witness.href}?log=${encodeURIComponent(witnessLog)}`] };

// --- servers the tenant points at ---------------------------------------------------------------

/** A TCP server that counts connections and how many are still open; without `onConnection` it never answers. */
interface Counted {
  port: number;
  connections: number;
  open: number;
  close(): void;
}
async function countingServer(host: string, onConnection: (socket: net.Socket) => void = () => undefined): Promise<Counted> {
  const sockets = new Set<net.Socket>();
  const state = {
    port: 0,
    connections: 0,
    get open() {
      return sockets.size;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
  const server = net.createServer((socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
    onConnection(socket);
    socket.resume(); // reads (and drops) what comes, so a client's close is seen at once
  });
  await new Promise<void>((r) => server.listen(0, host, () => r()));
  state.port = (server.address() as AddressInfo).port;
  return state;
}

/** Answers a PostgreSQL startup with AuthenticationOk and ReadyForQuery, then never answers a query. */
function postgresThatHangs(socket: net.Socket): void {
  socket.once("data", () =>
    socket.write(
      Buffer.concat([
        Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0]), // 'R' AuthenticationOk
        Buffer.from([0x5a, 0, 0, 0, 5, 0x49]), // 'Z' ReadyForQuery (idle)
      ]),
    ),
  );
}

/** Every connector, configured to reach `host:port` (a URL host is bracketed for IPv6). */
function connectors(host: string, port: number): [string, string, Record<string, unknown>][] {
  const h = host.includes(":") ? `[${host}]` : host;
  return [
    ["rest_api", "rest_api", { base_url: `http://${h}:${port}/v1`, endpoints: [{ name: "x", method: "GET", path: "/x" }] }],
    ["github", "github", { base_url: `http://${h}:${port}`, authentication: { type: "token", token_env: "GH_TOKEN" }, resources: { repositories: ["acme/app"] } }],
    ["slack", "slack", { base_url: `http://${h}:${port}/api`, authentication: { type: "oauth", bot_token_env: "GH_TOKEN" } }],
    ["websocket", "websocket", { url: `ws://${h}:${port}/feed`, subscription: { topics: ["t"] } }],
    ["mcp over http", "mcp", { transport: "http", url: `http://${h}:${port}/mcp` }],
    ["postgresql", "postgresql", { connection: { host, port, database: "app" } }],
    ["mysql", "mysql", { connection: { host, port, database: "app" } }],
    ["mongodb", "mongodb", { connection: { host, port, database: "app" } }],
  ];
}

describe("a hostile tenant with a standard key", () => {
  let scheduler: SchedulerHandle;
  let base: string;
  let mallory: string;
  let alice: string;
  let db: string;
  let fsBase: string;
  let marker: string;
  let inside: Counted;
  let allowed: Counted;
  let silent: Counted;
  let hangingPg: Counted;
  let redirector: HttpServer;
  let redirectorPort: number;
  const seenByAllowed: string[] = [];

  beforeAll(async () => {
    const dir = tempDir();
    db = join(dir, "kiln.db"); // SQLite whatever the run: the test reads the file's bytes and sets PG* variables in this process
    fsBase = join(dir, "fs");
    marker = join(dir, "pwned");
    writeFileSync(join(dir, "stdio.json"), JSON.stringify({ echo: { command: process.execPath, args: [resolve("test/fixtures/echo-mcp-server.mjs")] } }));
    process.env.KILN_HOSTILE_OPERATOR_SECRET = "operator-secret-value-0123";
    // The internal service a tenant must not reach, on every loopback name.
    inside = await countingServer("::");
    // A public-like server the operator allows (127.0.0.2/32), used as the tenant's own server.
    allowed = await countingServer("127.0.0.2", (socket) => {
      socket.once("data", (d) => {
        seenByAllowed.push(d.toString("latin1"));
        socket.end("HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: 27\r\nconnection: close\r\n\r\nINTERNAL-BODY-MUST-NOT-LEAK");
      });
    });
    silent = await countingServer("127.0.0.2");
    hangingPg = await countingServer("127.0.0.2", postgresThatHangs);
    redirector = createHttpServer((req, res) => {
      req.resume();
      res.writeHead(302, { location: `http://127.0.0.1:${inside.port}/steal` }).end();
    });
    await new Promise<void>((r) => redirector.listen(0, "127.0.0.2", () => r()));
    redirectorPort = (redirector.address() as AddressInfo).port;
    scheduler = await inProcessScheduler(
      {
        db,
        mcpTimeout: "1",
        mcpConcurrency: "4",
        mcpAllowCidr: "127.0.0.2/32",
        mcpFsBase: fsBase,
        mcpStdioServers: join(dir, "stdio.json"),
        adminToken: "dashboard-admin-token-0123",
        standardRpm: "100000",
      },
      sandboxWitness,
    );
    base = httpBase(scheduler);
    mallory = (await scheduler.keys.create({ account: "mallory", tier: "standard" })).token;
    alice = (await scheduler.keys.create({ account: "alice", tier: "standard" })).token;
    expect((await api(mallory, "PUT", "/secrets/GH_TOKEN", { value: "mallory-own-token" })).status).toBe(200);
  });
  afterAll(async () => {
    await scheduler?.close();
    for (const s of [inside, allowed, silent, hangingPg]) s?.close();
    redirector?.close();
  });

  async function api(key: string, method: string, path: string, body?: unknown, prefix = "/v1/mcp"): Promise<{ status: number; body: any }> {
    const res = await fetch(`${base}${prefix}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** Stores a configuration (expecting 201), tests it, and deletes it (an account keeps at most 100). */
  async function storeAndTest(key: string, server_type: string, config: Record<string, unknown>): Promise<{ status: number; body: any }> {
    const created = await api(key, "POST", "/servers", { name: `t-${server_type}`, server_type, config });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const tested = await api(key, "POST", "/test", { server_id: created.body.id });
    expect((await api(key, "DELETE", `/servers/${created.body.id}`)).status).toBe(204);
    return tested;
  }

  describe("no tenant-supplied programs", () => {
    const evil = { transport: "stdio", command: process.execPath, args: ["-e", ""] };
    beforeAll(() => {
      evil.args[1] = `require("fs").writeFileSync(${JSON.stringify(marker)}, "ran")`;
    });

    it("a stdio configuration with a command is refused on create, update and the dashboard, and never runs", async () => {
      const created = await api(mallory, "POST", "/servers", { name: "evil", server_type: "mcp", config: evil });
      expect(created.status).toBe(400);
      expect(created.body.error).toMatchObject({
        type: "invalid_request_error",
        code: "invalid_config",
        message: expect.stringMatching(
          /^config\.command: tenants cannot run programs on the scheduler; pick one of the operator's stdio servers with config\.server \(available: echo\)/,
        ),
      });
      const ok = await api(mallory, "POST", "/servers", { name: "fine", server_type: "mcp", config: { transport: "stdio", server: "echo" } });
      expect(ok.status).toBe(201);
      const updated = await api(mallory, "PUT", `/servers/${ok.body.id}`, { name: "fine", server_type: "mcp", config: evil });
      expect(updated.status).toBe(400);
      const viaDashboard = await api("dashboard-admin-token-0123", "POST", "/accounts/mallory/mcp", { name: "evil", server_type: "mcp", config: evil }, "/admin/api");
      expect(viaDashboard.status).toBe(400);
      const withArgsOnly = await api(mallory, "POST", "/servers", { name: "evil2", server_type: "mcp", config: { transport: "stdio", server: "echo", args: ["-e", "x"] } });
      expect(withArgsOnly.status).toBe(400);
      expect((await api(mallory, "POST", "/test", { server_id: ok.body.id })).status).toBe(200); // the stored one is still the operator's
      expect(existsSync(marker)).toBe(false);
    });
  });

  describe("secrets are the account's own", () => {
    it("*_env naming a scheduler variable, another account's secret or a missing one is refused at save time", async () => {
      expect((await api(alice, "PUT", "/secrets/ALICE_TOKEN", { value: "alice-secret-value" })).status).toBe(200);
      for (const name of ["KILN_HOSTILE_OPERATOR_SECRET", "KILN_ADMIN_TOKEN", "KILN_NODE_TOKENS", "ALICE_TOKEN", "NEVER_SET"]) {
        const res = await api(mallory, "POST", "/servers", {
          name: "steal",
          server_type: "github",
          config: { base_url: `http://127.0.0.2:${allowed.port}`, authentication: { type: "token", token_env: name } },
        });
        expect(res.status, name).toBe(400);
        expect(res.body.error).toEqual({
          type: "invalid_request_error",
          code: "unknown_secret",
          message: `config.authentication.token_env: this account has no secret named ${name}; set it first (PUT /v1/mcp/secrets/${name})`,
          param: "config.authentication.token_env",
        });
      }
      const viaEnvFrom = await api(mallory, "POST", "/servers", {
        name: "steal",
        server_type: "mcp",
        config: { transport: "stdio", server: "echo", env_from: { ECHO_NAME: "ALICE_TOKEN" } },
      });
      expect(viaEnvFrom.status).toBe(400);
    });

    it("the tenant's own secret reaches its own server, and only its own", async () => {
      expect((await api(alice, "PUT", "/secrets/GH_TOKEN", { value: "alice-own-token" })).status).toBe(200);
      seenByAllowed.length = 0;
      await storeAndTest(mallory, "github", {
        base_url: `http://127.0.0.2:${allowed.port}`,
        authentication: { type: "token", token_env: "GH_TOKEN" },
        resources: { repositories: ["acme/app"] },
      });
      const request = seenByAllowed.join("\n");
      expect(request).toMatch(/authorization: token mallory-own-token/i);
      expect(request).not.toContain("alice-own-token");
      expect(request).not.toContain("operator-secret-value-0123");
    });

    it("secret values are write-only and encrypted at rest, with the key outside the database", async () => {
      const listed = await api(mallory, "GET", "/secrets");
      expect(listed.body.data.map((s: { name: string }) => s.name)).toEqual(["GH_TOKEN"]);
      expect(JSON.stringify(listed.body)).not.toContain("mallory-own-token");
      expect((await api(alice, "GET", "/secrets")).body.data.map((s: { name: string }) => s.name)).toEqual(["ALICE_TOKEN", "GH_TOKEN"]);
      const stored = Buffer.concat([db, `${db}-wal`].filter(existsSync).map((f) => readFileSync(f)));
      expect(stored.includes("mallory-own-token")).toBe(false);
      expect(stored.includes("alice-secret-value")).toBe(false);
      expect(statSync(`${db}.secrets-key`).mode & 0o777).toBe(0o600);
      const bad = await api(mallory, "PUT", "/secrets/lower-case", { value: "x" });
      expect(bad.body.error).toMatchObject({ code: "invalid_secret_name", message: expect.stringMatching(/^name:/) });
      expect((await api(mallory, "PUT", "/secrets/EMPTY", { value: "" })).body.error.message).toMatch(/^value:/);
      expect((await api(mallory, "DELETE", "/secrets/ALICE_TOKEN")).status).toBe(404);
      expect((await api(alice, "GET", "/secrets")).body.data.map((s: { name: string }) => s.name)).toContain("ALICE_TOKEN");
    });
  });

  describe("one egress guard", () => {
    const targets = ["127.0.0.1", "::1", "localhost", "169.254.169.254", "10.0.0.1", "192.168.1.1", "100.64.0.1", "fd00::1", "::ffff:127.0.0.1", "0.0.0.0"];
    for (const target of targets) {
      it.each(connectors(target, 0).map(([label]) => [label]))(`%s pointed at ${target} → 403 mcp_egress_denied, nothing reached`, async (label) => {
        const port = LOOPBACK.test(target) || target === "0.0.0.0" ? inside.port : 8080;
        const [, type, config] = connectors(target, port).find(([l]) => l === label)!;
        const before = { inside: inside.connections, outside: refusedHosts().length };
        const res = await storeAndTest(mallory, type, config);
        expect(res.status, JSON.stringify(res.body)).toBe(403);
        expect(res.body.error).toMatchObject({
          type: "permission_error",
          code: "mcp_egress_denied",
          message: expect.stringMatching(/refused to connect: .* is not a public address/),
        });
        expect(inside.connections).toBe(before.inside);
        expect(refusedHosts().length).toBe(before.outside);
      });
    }

    it.each(
      connectors("127.0.0.2", 0)
        .filter(([, type]) => ["rest_api", "github", "slack", "websocket", "mcp"].includes(type))
        .map(([label]) => [label]),
    )("%s answered with a redirect to loopback → 403, the loopback server sees no request", async (label) => {
      const [, type, config] = connectors("127.0.0.2", redirectorPort).find(([l]) => l === label)!;
      const before = inside.connections;
      const res = await storeAndTest(mallory, type, config);
      expect(res.status, JSON.stringify(res.body)).toBe(403);
      expect(res.body.error.code).toBe("mcp_egress_denied");
      expect(inside.connections).toBe(before);
    });

    it("an upstream's error text is never echoed back", async () => {
      for (const [label, type, config] of connectors("127.0.0.2", allowed.port).filter(([, t]) => ["mcp", "github", "slack"].includes(t))) {
        const res = await storeAndTest(mallory, type, config);
        expect(res.status, label).toBe(502);
        expect(res.body.error, label).toMatchObject({
          code: "mcp_unreachable",
          message: expect.stringMatching(/is unreachable or failed the MCP handshake \(details are in the scheduler's log/),
        });
        expect(JSON.stringify(res.body), label).not.toContain("INTERNAL-BODY-MUST-NOT-LEAK");
      }
    });
  });

  describe("tests end what they start", () => {
    it.each(connectors("127.0.0.2", 0).map(([label]) => [label]))("%s: a server that accepts and never answers leaves no open socket after the timeout", async (label) => {
      const server = label === "postgresql" ? hangingPg : silent;
      const [, type, config] = connectors("127.0.0.2", server.port).find(([l]) => l === label)!;
      const before = server.connections;
      const res = await storeAndTest(mallory, type, config);
      expect(res.status).toBe(502);
      expect(res.body.error.code).toMatch(/^mcp_(timeout|unreachable)$/);
      expect(server.connections).toBeGreaterThan(before); // it did connect…
      await until(() => server.open === 0, 2000, `${label}'s sockets to close`); // …and closed every socket
      expect(server.open).toBe(0);
    });

    it("at most --mcp-concurrency tests run at once per account (429 beyond); another account is not affected", async () => {
      const created = await api(mallory, "POST", "/servers", { name: "slow", server_type: "rest_api", config: connectors("127.0.0.2", silent.port)[0]![2] });
      const results = await Promise.all(Array.from({ length: 5 }, () => api(mallory, "POST", "/test", { server_id: created.body.id })));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses).toEqual([429, 502, 502, 502, 502]);
      expect(results.find((r) => r.status === 429)!.body.error).toMatchObject({
        type: "rate_limit_error",
        code: "too_many_requests_in_flight",
        message: expect.stringMatching(/^server_id: this account already has 4 MCP tests running/),
      });
      expect((await api(mallory, "POST", "/test", { server_id: created.body.id })).status).toBe(502); // places freed
    });

    it("at most --mcp-total-concurrency tests run at once across accounts (503 mcp_busy beyond)", async () => {
      const small = await inProcessScheduler(
        { mcpTimeout: "1", mcpConcurrency: "4", mcpTotalConcurrency: "5", mcpAllowCidr: "127.0.0.2/32", standardRpm: "100000" },
        sandboxWitness,
      );
      try {
        const call = async (key: string, path: string, body: unknown) => {
          const res = await fetch(`${httpBase(small)}/v1/mcp${path}`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify(body),
          });
          return { status: res.status, body: (await res.json()) as any };
        };
        const runs = await Promise.all(
          ["one", "two"].map(async (account) => {
            const key = (await small.keys.create({ account, tier: "standard" })).token;
            const created = await call(key, "/servers", { name: "slow", server_type: "rest_api", config: connectors("127.0.0.2", silent.port)[0]![2] });
            return { key, id: created.body.id as string };
          }),
        );
        const results = await Promise.all(runs.flatMap(({ key, id }) => Array.from({ length: 4 }, () => call(key, "/test", { server_id: id }))));
        expect(results.filter((r) => r.status === 503).map((r) => r.body.error.code)).toEqual(["mcp_busy", "mcp_busy", "mcp_busy"]);
        expect(results.filter((r) => r.status === 502)).toHaveLength(5);
      } finally {
        await small.close();
      }
    });

    it("an account keeps at most 100 configurations", async () => {
      const other = (await scheduler.keys.create({ account: "hoarder", tier: "standard" })).token;
      for (let i = 0; i < 100; i++)
        expect((await api(other, "POST", "/servers", { name: `c${i}`, server_type: "mcp", config: { transport: "stdio", server: "echo" } })).status).toBe(201);
      const over = await api(other, "POST", "/servers", { name: "c100", server_type: "mcp", config: { transport: "stdio", server: "echo" } });
      expect(over.status).toBe(400);
      expect(over.body.error.code).toBe("mcp_server_limit");
      expect((await api(other, "GET", "/servers")).body.data).toHaveLength(100);
    });
  });

  describe("the operator's own settings never reach a tenant's server", () => {
    it("postgresql: no password, user or options from the scheduler's PG* environment or a pgpass file", async () => {
      const dir = tempDir();
      writeFileSync(join(dir, "pgpass"), "*:*:*:*:pgpass-file-secret\n", { mode: 0o600 });
      const saved = { ...process.env };
      Object.assign(process.env, {
        PGPASSWORD: "operator-pg-secret",
        PGUSER: "operator_admin",
        PGPASSFILE: join(dir, "pgpass"),
        PGOPTIONS: "-c search_path=secret",
        PGDATABASE: "operator_db",
      });
      const seen: Buffer[] = [];
      // A server that asks for a cleartext password and records what comes.
      const fake = await countingServer("127.0.0.2", (socket) => {
        socket.once("data", (startup) => {
          seen.push(startup);
          socket.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3])); // 'R' AuthenticationCleartextPassword
          socket.once("data", (password) => {
            seen.push(password);
            socket.end();
          });
        });
      });
      try {
        await storeAndTest(mallory, "postgresql", { connection: { host: "127.0.0.2", port: fake.port } });
        await until(() => seen.length === 2, 3000, "the startup and password messages");
        const wire = Buffer.concat(seen).toString("latin1");
        for (const leaked of ["operator-pg-secret", "pgpass-file-secret", "operator_admin", "search_path", "operator_db"]) expect(wire, leaked).not.toContain(leaked);
        expect(wire).toContain("user\0kiln\0");
      } finally {
        for (const k of ["PGPASSWORD", "PGUSER", "PGPASSFILE", "PGOPTIONS", "PGDATABASE"]) delete process.env[k];
        Object.assign(process.env, saved);
        fake.close();
      }
    });

    it("slack: a 429 with a huge Retry-After fails the test at once instead of leaving a wait behind", async () => {
      const limited = createHttpServer((req, res) => {
        req.resume();
        res.writeHead(429, { "retry-after": "2000000", "content-type": "application/json" }).end('{"ok":false,"error":"ratelimited"}');
      });
      await new Promise<void>((r) => limited.listen(0, "127.0.0.2", () => r()));
      try {
        const res = await storeAndTest(mallory, "slack", {
          base_url: `http://127.0.0.2:${(limited.address() as AddressInfo).port}/api`,
          authentication: { type: "oauth", bot_token_env: "GH_TOKEN" },
        });
        expect(res.status).toBe(502);
        expect(res.body.error.code).toBe("mcp_unreachable"); // refused, not left waiting until mcp_timeout
      } finally {
        limited.close();
      }
    });

    it("a stdio server name that every JavaScript object has is no catalog entry", async () => {
      for (const server of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
        const res = await api(mallory, "POST", "/servers", { name: "p", server_type: "mcp", config: { transport: "stdio", server, env_from: { X: "GH_TOKEN" } } });
        expect(res.status, server).toBe(400);
        expect(res.body.error.code).toMatch(/^(unknown_stdio_server|invalid_config)$/);
      }
    });

    it("an answer larger than the scheduler reads is cut off, not read whole into memory", async () => {
      let sent = 0; // MiB the server got out before the scheduler hung up
      const huge = createHttpServer((req, res) => {
        req.resume();
        res.writeHead(200, { "content-type": "application/json" });
        const chunk = Buffer.alloc(1024 * 1024, 0x20);
        const pump = () => {
          while (sent < 64 && res.write(chunk)) sent++;
          if (sent < 64)
            res.once("drain", () => {
              sent++;
              pump();
            });
          else res.end("{}");
        };
        pump();
      });
      await new Promise<void>((r) => huge.listen(0, "127.0.0.2", () => r()));
      try {
        const res = await storeAndTest(mallory, "mcp", { transport: "http", url: `http://127.0.0.2:${(huge.address() as AddressInfo).port}/mcp` });
        expect(res.status).toBe(502);
        expect(sent).toBeLessThan(32); // 8 MiB read, plus what the sockets' buffers held
      } finally {
        huge.close();
      }
    });
  });

  describe("filesystem roots stay in the account's folder", () => {
    it("an absolute or escaping root_path is refused at save time; a symlink out of the folder fails the test", async () => {
      for (const root_path of ["/etc", "../alice", "docs/../../alice", "/"]) {
        const res = await api(mallory, "POST", "/servers", { name: "fs", server_type: "filesystem", config: { root_path } });
        expect(res.status, root_path).toBe(400);
        expect(res.body.error.message).toMatch(/^config\.root_path:/);
      }
      mkdirSync(join(fsBase, "alice", "private"), { recursive: true });
      writeFileSync(join(fsBase, "alice", "private", "diary.txt"), "alice's diary");
      mkdirSync(join(fsBase, "mallory"), { recursive: true });
      symlinkSync(join(fsBase, "alice", "private"), join(fsBase, "mallory", "link"));
      const res = await storeAndTest(mallory, "filesystem", { root_path: "link" });
      expect(res.status).toBe(502);
      expect(res.body.error.code).toBe("mcp_misconfigured");
      expect(JSON.stringify(res.body)).not.toContain("diary");
    });

    it("an account whose name is not a plain folder name cannot be created (kiln keys, the dashboard)", async () => {
      for (const account of ["..", "../alice", "a/b", ".hidden", ""]) {
        await expect(scheduler.keys.create({ account, tier: "standard" }), account).rejects.toMatchObject({
          status: 400,
          code: "invalid_account",
          message: expect.stringMatching(/^account: /),
        });
      }
      expect((await scheduler.keys.list()).map((k) => k.account)).not.toContain("../alice");
    });

    it("without --mcp-fs-base the filesystem type is refused", async () => {
      const plain = await inProcessScheduler({}, sandboxWitness);
      try {
        const key = (await plain.keys.create({ account: "x", tier: "standard" })).token;
        const res = await fetch(`${httpBase(plain)}/v1/mcp/servers`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "fs", server_type: "filesystem", config: { root_path: "docs" } }),
        });
        expect(res.status).toBe(400);
        expect((await res.json()).error).toMatchObject({ code: "mcp_filesystem_disabled", message: expect.stringMatching(/^server_type: filesystem servers are off/) });
      } finally {
        await plain.close();
      }
    });
  });

  it("no connection left this machine during the suite", () => {
    expect(refusedHosts()).toEqual([]);
  });
});

/**
 * A tenant's upstream server cannot stop the scheduler: every MCP test runs in a sandbox process.
 * Each server here is the tenant's own (on 127.0.0.2, which the scheduler lets tenants reach) and
 * speaks just enough of its protocol to send what broke a client library inside the scheduler
 * once, or to flood it. The scheduler is a `kiln scheduler` process: a throw out of a socket's
 * listener would end it, and the test would see it gone.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rss } from "../scripts/lib/media.js";
import { kilnKey } from "../scripts/lib/run.js";
import { AnswerTooLargeError, connectScope, EgressPolicy, createWebsocketServer } from "../scheduler/mcp/index.js";
import { createMysqlServer } from "../scheduler/mcp/mysql.js";
import { createPostgresServer } from "../scheduler/mcp/sql.js";
import { spawnScheduler, tempDir, type KilnProcess } from "./helpers/fleet.js";
import { mysqlUnsolicited, postgresFlood, postgresMalformedRow, websocketBadRedirect, type Upstream } from "../scripts/lib/hostile-upstreams.js";

const TENANT_HOST = "127.0.0.2";

describe("a tenant's server cannot crash, flood or hang the scheduler", () => {
  let scheduler: { proc: KilnProcess; http: number };
  let base: string;
  let key: string;
  const upstreams: Upstream[] = [];

  beforeAll(async () => {
    const db = join(tempDir(), "kiln.db");
    scheduler = await spawnScheduler(db, {}, ["--mcp-allow-cidr", `${TENANT_HOST}/32`, "--mcp-timeout", "5", "--mcp-read-limit", "16mb"]);
    base = `http://127.0.0.1:${scheduler.http}`;
    key = kilnKey(db, "mallory");
  });
  afterAll(async () => {
    for (const u of upstreams) u.close();
    await scheduler?.proc.stop();
  });

  async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${base}/v1/mcp${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  async function storeAndTest(server_type: string, config: Record<string, unknown>): Promise<{ status: number; body: any }> {
    const created = await api("POST", "/servers", { name: `t-${server_type}`, server_type, config });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const tested = await api("POST", "/test", { server_id: created.body.id });
    await api("DELETE", `/servers/${created.body.id}`);
    return { ...tested, body: { ...tested.body, id: created.body.id } };
  }

  /** The scheduler process is still there and answering, and met no fault (after one it drains and exits). */
  async function expectAlive(): Promise<void> {
    expect(scheduler.proc.lines.filter((l) => /uncaught exception|unhandled rejection/.test(l))).toEqual([]);
    expect(scheduler.proc.child.exitCode, scheduler.proc.lines.slice(-5).join("\n")).toBeNull();
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  }

  async function upstream(start: Promise<Upstream>): Promise<Upstream> {
    const u = await start;
    upstreams.push(u);
    return u;
  }

  it("a websocket server redirecting the upgrade to `http://[` ends its test with a 502 naming the server", async () => {
    const u = await upstream(websocketBadRedirect(TENANT_HOST));
    const res = await storeAndTest("websocket", { url: `ws://${TENANT_HOST}:${u.port}/feed`, subscription: { topics: ["t"] } });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toContain(`server_id: ${res.body.id} (websocket)`);
    await expectAlive();
  });

  it("a PostgreSQL server answering the startup with a DataRow that claims a field and carries none ends its test with a 502", async () => {
    const u = await upstream(postgresMalformedRow(TENANT_HOST));
    const res = await storeAndTest("postgresql", { connection: { host: TENANT_HOST, port: u.port, database: "app" } });
    expect(res.status).toBe(502);
    expect(res.body.error.type).toBe("upstream_error");
    expect(res.body.error.message).toContain(`server_id: ${res.body.id} (postgresql)`);
    await expectAlive();
  });

  it("a MySQL server sending OK and an unsolicited, truncated packet in one segment ends its test with a 502", async () => {
    const u = await upstream(mysqlUnsolicited(TENANT_HOST));
    const res = await storeAndTest("mysql", { connection: { host: TENANT_HOST, port: u.port, database: "app" } });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toContain(`server_id: ${res.body.id} (mysql)`);
    await expectAlive();
  });

  it("a PostgreSQL server answering the listing with 200 MB of rows is cut off at the read limit; the scheduler's memory does not grow with it", async () => {
    const u = await upstream(postgresFlood(TENANT_HOST, 200 * 2 ** 20));
    const before = rss(scheduler.proc.child.pid!);
    const res = await storeAndTest("postgresql", { connection: { host: TENANT_HOST, port: u.port, database: "app" } });
    const after = rss(scheduler.proc.child.pid!);
    expect(res.status).toBe(502);
    expect(res.body.error.code, scheduler.proc.lines.slice(-6).join("\n")).toBe("mcp_answer_too_large");
    expect(u.sent()).toBeLessThan(100 * 2 ** 20); // the client stopped reading long before the end
    expect(after - before).toBeLessThan(48 * 2 ** 20);
    await expectAlive();
  });
});

describe("the client libraries fail cleanly on those bytes, without the sandbox too", () => {
  const upstreams: Upstream[] = [];
  afterAll(() => {
    for (const u of upstreams) u.close();
  });

  /** Runs `connect` in this process with the guard a test gets; resolves with what it threw (an uncaught throw fails the run). */
  async function failure(start: Promise<Upstream>, connect: (u: Upstream, ctx: ReturnType<typeof connectScope>["context"]) => Promise<unknown>): Promise<Error> {
    const u = await start;
    upstreams.push(u);
    const scope = connectScope({ egress: new EgressPolicy({ allow: [`${TENANT_HOST}/32`] }), secret: () => "", timeoutMs: 3000 });
    const started = Date.now();
    try {
      await connect(u, scope.context);
      throw new Error("the connection succeeded");
    } catch (err) {
      expect(Date.now() - started).toBeLessThan(2500); // failed at once, not at the timeout
      return err as Error;
    } finally {
      await scope.close();
    }
  }

  it("ws: a redirect to an address no parser takes fails the handshake", async () => {
    const err = await failure(websocketBadRedirect(TENANT_HOST), (u, ctx) =>
      createWebsocketServer({ url: `ws://${TENANT_HOST}:${u.port}/f`, subscription: { topics: ["t"] } }, ctx),
    );
    expect(err.message).toMatch(/answered 302 instead of upgrading/);
  });

  it("pg: a DataRow that claims a field and carries none fails the connection", async () => {
    const err = await failure(postgresMalformedRow(TENANT_HOST), (u, ctx) => createPostgresServer({ connection: { host: TENANT_HOST, port: u.port, database: "app" } }, ctx));
    expect(err.message).toMatch(/answer broke its client/);
  });

  it("mysql2: an unsolicited, truncated packet fails the connection", async () => {
    const err = await failure(mysqlUnsolicited(TENANT_HOST), (u, ctx) => createMysqlServer({ connection: { host: TENANT_HOST, port: u.port, database: "app" } }, ctx));
    expect(err).toBeInstanceOf(Error);
  });

  it("pg: rows without end are cut off at 8 MiB a connection", async () => {
    const flood = postgresFlood(TENANT_HOST, 200 * 2 ** 20);
    const err = await failure(flood, (u, ctx) => createPostgresServer({ connection: { host: TENANT_HOST, port: u.port, database: "app" } }, ctx));
    expect(err).toBeInstanceOf(AnswerTooLargeError);
    expect(upstreams.at(-1)!.sent()).toBeLessThan(64 * 2 ** 20);
  });
});

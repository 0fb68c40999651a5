/**
 * The dashboard's fleet API (`/admin/api/fleet…`) on a real scheduler with an operator's catalog and
 * two real placeable agents (no --serve, CPU, 100 MB budgets; every catalog entry says its size,
 * 40 MB, so a node holds two replicas): the fleet as the page reads it, pinning a replica to a node
 * (loaded there, evicting only what is not pinned), unpinning, unloading (a busy replica only with
 * force), draining a node, and each refusal.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { catalogFile, httpBase, inProcessAgent, inProcessScheduler, postChat, tempDir, TINY_MODEL, until } from "./helpers/fleet.js";

const ADMIN = "fleet-admin-token-0123456789";
const MB = 1_000_000;
const SHAPE = { context_size: 2048, sequences: 2, idle_unload_s: 0, memory_bytes: 40 * MB };

/** The ids of the models `agent` serves now. */
const served = (agent: AgentHandle) => agent.engine.modelPools.flatMap((p) => p.modelIds).sort();

interface Replica {
  model: string;
  state: string;
  progress: number;
  bytes: number[];
  inflight: number;
  slots: number;
  last_used_at: number;
  pinned: boolean;
}
interface FleetNode {
  node_id: string;
  placeable: boolean;
  draining: boolean;
  devices: { name: string; total_bytes: number; free_bytes: number }[];
  replicas: Replica[];
}
interface FleetBody {
  catalog_active: boolean;
  nodes: FleetNode[];
  models: { id: string; status: string; replicas: number; ready: number }[];
}

describe("the dashboard's fleet API", () => {
  let scheduler: SchedulerHandle;
  let agents: AgentHandle[];
  let key: string;
  const call = async (method: string, path: string, body?: unknown, token = ADMIN) => {
    const res = await fetch(`${httpBase(scheduler)}/admin/api${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  const fleet = async () => (await call("GET", "/fleet")).body as FleetBody;
  const node = async (id: string) => (await fleet()).nodes.find((n) => n.node_id === id);
  const replica = async (id: string, model: string) => (await node(id))?.replicas.find((r) => r.model === model);
  const pin = (model: unknown, node: unknown) => call("POST", "/fleet/pins", { model, node });
  /** Expects a refusal: its status, and the error body's code, message (matched) and param when given. */
  const refused = (res: { status: number; body: any }, status: number, code: string, message: RegExp, param?: string) => {
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(res.body.error.code).toBe(code);
    expect(res.body.error.message).toMatch(message);
    if (param !== undefined) expect(res.body.error.param).toBe(param);
  };

  beforeAll(async () => {
    const file = catalogFile([
      { id: "fam-a", source: TINY_MODEL, aliases: ["a"], ...SHAPE },
      { id: "fam-b", source: TINY_MODEL, ...SHAPE },
      { id: "fam-c", source: TINY_MODEL, ...SHAPE },
      { id: "fam-d", source: TINY_MODEL, ...SHAPE },
      { id: "fam-huge", source: TINY_MODEL, ...SHAPE, memory_bytes: 10 ** 15 },
    ]);
    scheduler = await inProcessScheduler({ catalog: file, adminToken: ADMIN, queueTimeout: "60" });
    const placeable = (nodeId: string) => inProcessAgent(scheduler, { serve: [], nodeId, memoryBudget: String(100 * MB) });
    agents = [await placeable("node-1"), await placeable("node-2")];
    await until(() => scheduler.fleet.snapshot().length === 2, 15_000, "both agents to join");
    key = (await scheduler.keys.create({ account: "fleet", tier: "pro" })).token;
  }, 60_000);
  afterAll(async () => {
    for (const a of agents ?? []) await a.close();
    await scheduler?.close();
  });

  it("needs the admin token, and shows each node's devices and replicas and each catalog model's status", async () => {
    expect((await call("GET", "/fleet", undefined, "wrong-token-wrong-token")).status).toBe(401);
    expect((await call("POST", "/fleet/pins", { model: "fam-a", node: "node-1" }, "wrong-token-wrong-token")).status).toBe(401);
    expect((await call("POST", "/fleet/nodes/node-1/drain", undefined, "wrong-token-wrong-token")).status).toBe(401);
    await until(async () => (await fleet()).models.every((m) => m.status !== "unavailable"), 10_000, "the sizes to be known");
    const body = await fleet();
    expect(body.catalog_active).toBe(true);
    expect(body.nodes.map((n) => n.node_id).sort()).toEqual(["node-1", "node-2"]);
    for (const n of body.nodes) {
      expect(n).toMatchObject({ placeable: true, draining: false, replicas: [] });
      expect(n.devices).toEqual([{ name: expect.any(String), total_bytes: 100 * MB, free_bytes: 100 * MB }]);
    }
    expect(body.models.map((m) => [m.id, m.status, m.replicas])).toEqual([
      ["fam-a", "placeable", 0],
      ["fam-b", "placeable", 0],
      ["fam-c", "placeable", 0],
      ["fam-d", "placeable", 0],
      ["fam-huge", "too_large", 0],
    ]);
  });

  it("pins a replica to a node by an alias: answered loading, then shown ready there, its memory taken from the device's free", async () => {
    const res = await pin("a", "node-2");
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toEqual({ node: "node-2", model: "fam-a", pinned: true, state: "loading", evicted: [] });
    await until(async () => (await replica("node-2", "fam-a"))?.state === "ready", 30_000, "the pinned replica to be ready");
    const n = (await node("node-2"))!;
    expect(n.replicas).toEqual([{ model: "fam-a", state: "ready", progress: 1, bytes: [40 * MB], inflight: 0, slots: 2, last_used_at: expect.any(Number), pinned: true }]);
    expect(n.devices[0]!.free_bytes).toBe(60 * MB);
    expect((await node("node-1"))!.replicas).toEqual([]);
    expect(agents.map(served)).toEqual([[], ["fam-a"]]);
    expect((await fleet()).models.find((m) => m.id === "fam-a")).toMatchObject({ status: "available", replicas: 1, ready: 1 });
    // the replica answers through the fleet; pinning the one there again only pins it
    expect((await postChat(httpBase(scheduler), key, { model: "fam-a", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 })).status).toBe(200);
    const again = await pin("fam-a", "node-2");
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ node: "node-2", model: "fam-a", pinned: true, state: "ready", evicted: [] });
  }, 60_000);

  it("refuses a pin naming the field at fault: an unknown node, a model outside the catalog, a node too small, the model at its max_replicas, a bad body", async () => {
    refused(await pin("fam-b", "node-9"), 404, "node_not_found", /^node: no node "node-9" is connected to this scheduler$/);
    refused(await pin("gpt-4o", "node-1"), 400, "model_not_found", /^model: "gpt-4o" is not a model of the operator's catalog$/, "model");
    refused(await pin("fam-huge", "node-1"), 409, "placement_refused", /^node: "node-1" offers 95\.4 MiB in all, and a replica of "fam-huge" needs 931322\.6 GiB$/);
    refused(await pin("fam-a", "node-1"), 409, "placement_refused", /^model: "fam-a" has its max_replicas \(1\) already, on "node-2"; unload one first/);
    refused(await call("POST", "/fleet/pins", { node: "node-1" }), 400, "missing_required_field", /^model: is required$/, "model");
    refused(await pin("fam-b", 7), 400, "invalid_type", /^node: expected a string, got number$/, "node");
    refused(await pin("", "node-1"), 400, "invalid_model", /^model: expected a non-empty string/, "model");
    refused(await call("POST", "/fleet/pins", "{"), 400, "invalid_json", /^body: malformed JSON/);
    expect(agents.map(served)).toEqual([[], ["fam-a"]]); // nothing refused was loaded
  });

  it("evicts only what is not pinned when a pin needs room, and refuses one when only pinned replicas could make it", async () => {
    // node-2: fam-a (pinned, its least recently used) and fam-b (unpinned); a pin of fam-c there must unload one
    expect((await pin("fam-b", "node-2")).status).toBe(202);
    await until(async () => (await replica("node-2", "fam-b"))?.state === "ready", 30_000, "fam-b to be ready");
    expect((await call("DELETE", "/fleet/pins", { model: "fam-b", node: "node-2" })).status).toBe(204);
    expect(await replica("node-2", "fam-b")).toMatchObject({ pinned: false });
    const res = await pin("fam-c", "node-2");
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toMatchObject({ model: "fam-c", state: "loading", evicted: ["fam-b"] });
    await until(async () => (await node("node-2"))!.replicas.every((r) => r.state === "ready" && r.model !== "fam-b"), 30_000, "fam-c to replace fam-b");
    expect((await node("node-2"))!.replicas.map((r) => [r.model, r.pinned])).toEqual([
      ["fam-a", true],
      ["fam-c", true],
    ]);
    expect(agents.map(served)).toEqual([[], ["fam-a", "fam-c"]]);
    refused(
      await pin("fam-d", "node-2"),
      409,
      "placement_refused",
      /^node: "node-2" has 19\.1 MiB free, and a replica of "fam-d" needs 38\.1 MiB; what it holds cannot make room: fam-a \(pinned\), fam-c \(pinned\)$/,
    );
    // a request for a cold model goes to the node with room meanwhile
    expect((await postChat(httpBase(scheduler), key, { model: "fam-d", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 })).status).toBe(200);
    expect(agents.map(served)).toEqual([["fam-d"], ["fam-a", "fam-c"]]);
  }, 90_000);

  it("unpins: 204, then 404 for a pin that is not there; refusals name the node or the model", async () => {
    expect((await call("DELETE", "/fleet/pins", { model: "fam-c", node: "node-2" })).status).toBe(204);
    expect(await replica("node-2", "fam-c")).toMatchObject({ state: "ready", pinned: false });
    refused(await call("DELETE", "/fleet/pins", { model: "fam-c", node: "node-2" }), 404, "replica_not_found", /^model: "fam-c" is not pinned on node "node-2"$/);
    refused(await call("DELETE", "/fleet/pins", { model: "fam-c", node: "node-9" }), 404, "node_not_found", /^node: no node "node-9"/);
    refused(await call("DELETE", "/fleet/pins", { model: "nope", node: "node-2" }), 400, "model_not_found", /^model: "nope" is not a model/, "model");
  });

  it("unloads a replica: one answering a request only with force (it finishes first), its pin going with it", async () => {
    refused(await call("POST", "/fleet/unload", { model: "fam-b", node: "node-2" }), 404, "replica_not_found", /^model: node "node-2" holds no replica of "fam-b"$/);
    refused(await call("POST", "/fleet/unload", { model: "fam-a", node: "node-9" }), 404, "node_not_found", /^node: no node "node-9"/);
    refused(await call("POST", "/fleet/unload", { model: "nope", node: "node-2" }), 400, "model_not_found", /^model: "nope"/, "model");
    refused(await call("POST", "/fleet/unload", { model: "fam-a", node: "node-2", force: "yes" }), 400, "invalid_type", /^force: expected true or false, got string$/, "force");

    // a long completion on node-2's pinned fam-a
    const stream = await fetch(`${httpBase(scheduler)}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "fam-a", messages: [{ role: "user", content: "a long story" }], max_tokens: 2000, temperature: 0, stream: true }),
    });
    const reader = stream.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value);
    while (text.split("data:").length < 3) text += decoder.decode((await reader.read()).value);
    refused(
      await call("POST", "/fleet/unload", { model: "a", node: "node-2" }),
      409,
      "replica_busy",
      /^model: the replica of "fam-a" on node "node-2" answers 1 request now; unload it with force: true/,
    );
    const res = await call("POST", "/fleet/unload", { model: "a", node: "node-2", force: true });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toEqual({ node: "node-2", model: "fam-a", state: "unloading", unpinned: true, inflight: 1 });
    expect(await replica("node-2", "fam-a")).toMatchObject({ state: "unloading", pinned: false });
    // the completion under way ends whole on the node; then the replica is gone
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text.trim().endsWith("data: [DONE]"), text.slice(-300)).toBe(true);
    await until(async () => (await replica("node-2", "fam-a")) === undefined, 15_000, "the replica to be unloaded");
    expect(served(agents[1]!)).toEqual(["fam-c"]);
    // the device's free memory follows: the node's next heartbeat reports what the unload freed
    await until(async () => (await node("node-2"))!.devices[0]!.free_bytes === 60 * MB, 5000, "the freed memory to show");

    // an idle replica goes without force
    expect((await call("POST", "/fleet/unload", { model: "fam-c", node: "node-2" })).status).toBe(202);
    await until(() => served(agents[1]!).length === 0, 15_000, "fam-c to be unloaded");
  }, 60_000);

  it("drains a node: it takes no more work and its link to the scheduler closes; refusals name the node and the field", async () => {
    refused(await call("POST", "/fleet/nodes/node-9/drain"), 404, "node_not_found", /^node: no node "node-9"/);
    refused(await call("POST", "/fleet/nodes/node-1/drain", { deadline_s: -1 }), 400, "invalid_deadline_s", /^deadline_s: /, "deadline_s");
    refused(await call("POST", "/fleet/nodes/node-1/drain", { deadline_s: 1.5 }), 400, "invalid_deadline_s", /^deadline_s: /, "deadline_s");
    expect((await fleet()).models.find((m) => m.id === "fam-d")).toMatchObject({ status: "available", replicas: 1 });
    const res = await call("POST", "/fleet/nodes/node-1/drain", { deadline_s: 5 });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toEqual({ node: "node-1", draining: true, deadline_s: 5, already: false });
    await until(() => !scheduler.fleet.snapshot().some((a) => a.nodeId === "node-1"), 15_000, "node-1's link to close");
    refused(await pin("fam-d", "node-1"), 404, "node_not_found", /^node: no node "node-1"/);
    // its model is placed again on the node left, on demand
    const chat = await postChat(httpBase(scheduler), key, { model: "fam-d", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 });
    expect(chat.status, JSON.stringify(chat.body)).toBe(200);
    expect(served(agents[1]!)).toEqual(["fam-d"]);
  }, 60_000);
});

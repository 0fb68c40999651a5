/**
 * The fleet placing models itself: real schedulers with an operator's catalog, real agents started
 * without --serve on CPU with memory budgets, the fabricated tiny model (as a file, and split in two
 * GGUFs served by a hub on loopback). Each agent's budget holds two replicas of the catalog's shape.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import { ensureTestSplitModel } from "../fabricate/index.js";
import { estimateReplica } from "../scheduler/placement/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { createPostgresDatabase, postgresServerUrl } from "./helpers/db.js";
import { catalogFile, httpBase, inProcessAgent, inProcessScheduler, postChat, TINY_MODEL, until } from "./helpers/fleet.js";
import { startHub, type TestHub } from "./helpers/hub.js";
import { postgresBin, startPostgres, type Postgres } from "./helpers/postgres.js";

const SHAPE = { context_size: 512, sequences: 1, idle_unload_s: 0 };

/** The ids of the models `agent` serves now. */
const served = (agent: AgentHandle) => agent.engine.modelPools.flatMap((p) => p.modelIds).sort();

let hub: TestHub;
let size: number;
beforeAll(async () => {
  hub = await startHub();
  const parts = await ensureTestSplitModel();
  for (const part of parts) hub.put("acme/tiny-split-GGUF", basename(part), { body: readFileSync(part) });
  size = (await estimateReplica(TINY_MODEL, { contextSize: SHAPE.context_size, sequences: SHAPE.sequences })).bytes;
});
afterAll(() => hub?.close());

/** A placeable agent (no --serve) of `scheduler`s whose budget holds two replicas. */
function placeable(schedulers: SchedulerHandle[], nodeId: string): Promise<AgentHandle> {
  return inProcessAgent(schedulers[0]!, {
    scheduler: schedulers.map((s) => `127.0.0.1:${s.grpc.port}`).join(","),
    serve: [],
    nodeId,
    memoryBudget: String(Math.floor(size * 2.5)),
    hubUrl: hub.url,
    offline: "false",
  });
}

describe("placement by demand on agents without --serve", () => {
  let scheduler: SchedulerHandle;
  let agents: AgentHandle[];
  let key: string;
  const chat = (model: string) => postChat(httpBase(scheduler), key, { model, messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 4, temperature: 0 });
  const status = async () => {
    const body = (await (await fetch(`${httpBase(scheduler)}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as { models: { id: string; status: string }[] };
    return Object.fromEntries(body.models.map((m) => [m.id, m.status]));
  };

  beforeAll(async () => {
    const file = catalogFile([
      { id: "fam-a", source: TINY_MODEL, aliases: ["a"], ...SHAPE },
      { id: "fam-b", source: TINY_MODEL, ...SHAPE },
      { id: "fam-c", source: TINY_MODEL, ...SHAPE },
      { id: "fam-split", source: "hf:acme/tiny-split-GGUF/tiny-chat-split-00001-of-00002.gguf", ...SHAPE },
      { id: "fam-d", source: TINY_MODEL, ...SHAPE },
      { id: "fam-huge", source: TINY_MODEL, ...SHAPE, memory_bytes: 10 ** 15 },
    ]);
    scheduler = await inProcessScheduler({ catalog: file, hubUrl: hub.url, queueTimeout: "60" });
    agents = [await placeable([scheduler], "node-1"), await placeable([scheduler], "node-2")];
    await until(() => scheduler.fleet.snapshot().length === 2, 15_000, "both agents to join");
    key = (await scheduler.keys.create({ account: "placement", tier: "pro" })).token;
  }, 60_000);
  afterAll(async () => {
    for (const a of agents ?? []) await a.close();
    await scheduler?.close();
  });

  it("lists the catalog with each model's status: placeable before any replica, too_large for one no node could hold", async () => {
    await until(async () => (await status())["fam-a"] === "placeable", 10_000, "the sizes to be known");
    expect(await status()).toMatchObject({ "fam-a": "placeable", "fam-split": "placeable", "fam-huge": "too_large" });
    expect(agents.map(served)).toEqual([[], []]);
  });

  it("refuses a model too large for every node at once with 503 model_too_large naming what it needs and the largest node", async () => {
    const started = Date.now();
    const res = await chat("fam-huge");
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe("model_too_large");
    expect(res.body.error.message).toMatch(/^model: "fam-huge" needs 931322\.6 GiB of memory for its context and sequences; the largest node, node-\d, has \d+\.\d MiB$/);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("serves each cold model after placing a replica, an alias too, and packs a node before using the next", async () => {
    for (const model of ["fam-a", "fam-b", "a"]) {
      const res = await chat(model);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.model).toBe(model);
    }
    expect(agents.map(served)).toEqual([["fam-a", "fam-b"], []]);
    expect(await status()).toMatchObject({ "fam-a": "available", "fam-b": "available", "fam-c": "placeable" });
  });

  it("pulls a split GGUF from the hub onto the node with room and serves it from its first part", async () => {
    for (const model of ["fam-c", "fam-split"]) expect((await chat(model)).status).toBe(200);
    expect(agents.map(served)).toEqual([
      ["fam-a", "fam-b"],
      ["fam-c", "fam-split"],
    ]);
  });

  it("unloads the least recently used idle replica of a full node for a model with none", async () => {
    expect((await chat("fam-c")).status).toBe(200); // node-2's fam-split is now its least recently used
    expect((await chat("fam-a")).status).toBe(200); // node-1's fam-b is now its least recently used
    const res = await chat("fam-d");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const now = agents.map(served);
    // one of the two least recently used replicas made room; the fleet holds four replicas
    expect(now.flat()).toHaveLength(4);
    expect(now.flat()).toContain("fam-d");
    expect([now[0]!.includes("fam-b"), now[1]!.includes("fam-split")].filter((kept) => !kept)).toHaveLength(1);
    expect(now.flat()).toEqual(expect.arrayContaining(["fam-a", "fam-c"]));
  });

  it("places a model again on the other node when the node holding it goes away", async () => {
    const holder = agents.findIndex((a) => served(a).includes("fam-d"));
    await agents[holder]!.close();
    const other = agents[1 - holder]!;
    await until(() => scheduler.fleet.snapshot().length === 1, 10_000, "the node's departure");
    const res = await chat("fam-d");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(served(other)).toContain("fam-d");
    agents.splice(holder, 1);
  });
});

const PG = postgresBin();

describe.skipIf(!PG)(`two schedulers sharing PostgreSQL${PG ? "" : " (skipped: no PostgreSQL binaries; apt-get install postgresql)"}`, () => {
  let schedulers: SchedulerHandle[];
  let agents: AgentHandle[];
  let pg: Postgres;

  beforeAll(async () => {
    pg = await startPostgres(PG!);
    const db = createPostgresDatabase(postgresServerUrl(pg.port));
    const file = catalogFile([{ id: "fam-cold", source: TINY_MODEL, ...SHAPE }]);
    schedulers = [await inProcessScheduler({ db, catalog: file, queueTimeout: "60" }), await inProcessScheduler({ db, queueTimeout: "60" })];
    agents = [await placeable(schedulers, "node-1"), await placeable(schedulers, "node-2")];
    await until(() => schedulers.every((s) => s.fleet.snapshot().length === 2), 15_000, "both agents to join both schedulers");
  }, 60_000);
  afterAll(async () => {
    for (const a of agents ?? []) await a.close();
    for (const s of schedulers ?? []) await s.close();
    pg?.stop();
  });

  it("loads a cold model asked of both at once only once: one replica in the fleet serves both", async () => {
    const keys = await Promise.all(schedulers.map(async (s) => (await s.keys.create({ account: `acct-${s.grpc.port}`, tier: "pro" })).token));
    const answers = await Promise.all(
      schedulers.map((s, i) => postChat(httpBase(s), keys[i]!, { model: "fam-cold", messages: [{ role: "user", content: "Hi" }], max_tokens: 4, temperature: 0 })),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(agents.map(served).flat()).toEqual(["fam-cold"]);
  });
});

describe("--serve under an operator's catalog", () => {
  it("takes any model id an operator's catalog may name, and refuses one that is no id", async () => {
    const scheduler = await inProcessScheduler({ catalog: catalogFile([{ id: "house/chat:v2", source: TINY_MODEL, ...SHAPE }]) });
    try {
      const agent = await inProcessAgent(scheduler, { serve: [`house/chat:v2=${TINY_MODEL}`] });
      await until(() => scheduler.fleet.serves("house/chat:v2"), 10_000, "the agent to join");
      await agent.close();
      await expect(inProcessAgent(scheduler, { serve: [`bad id!=${TINY_MODEL}`] })).rejects.toThrow(/^--serve \/ KILN_SERVE: "bad id!" is not a model id/);
    } finally {
      await scheduler.close();
    }
  });
});

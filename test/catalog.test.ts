/**
 * The operator's model catalog through the public API, with real schedulers and a real agent: one
 * scheduler started with `--catalog FILE`, a second one on the same database without it, and one
 * agent (the fabricated tiny model, as `famB-v3.1`) linked to both. Aliases are served as their
 * model, the answer names what the client sent, anything outside the catalog is refused, and an
 * edit through the first scheduler's dashboard API reaches the second.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { testDb } from "./helpers/db.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, postChat, tempDir, TINY_MODEL, until } from "./helpers/fleet.js";

const ADMIN = "catalog-admin-token-0123";
const CATALOG = {
  models: [
    { id: MODEL_ID, source: TINY_MODEL, aliases: ["house/chat", "gpt-4o"], name: "House chat" },
    { id: "house/big", source: "hf:org/big-GGUF/big-Q4_K_M-00002-of-00003.gguf", aliases: ["big"], context_size: 32768, max_replicas: 2 },
  ],
};

let first: SchedulerHandle;
let second: SchedulerHandle;
let agent: AgentHandle;
let key: string;

beforeAll(async () => {
  const db = testDb();
  const file = join(tempDir(), "catalog.json");
  writeFileSync(file, JSON.stringify(CATALOG));
  first = await inProcessScheduler({ db, catalog: file, adminToken: ADMIN });
  second = await inProcessScheduler({ db, adminToken: ADMIN });
  agent = await inProcessAgent(first, { scheduler: [first, second].map((s) => `127.0.0.1:${s.grpc.port}`).join(",") });
  await until(() => first.fleet.snapshot().length === 1 && second.fleet.snapshot().length === 1, 15_000, "the agent to join both schedulers");
  key = (await first.keys.create({ account: "catalog", tier: "pro" })).token;
}, 60_000);

afterAll(async () => {
  await agent?.close();
  await first?.close();
  await second?.close();
});

type Shape = { data: { id: string; owned_by: string }[]; models: { id: string; name: string; aliases: string[]; status: string; capabilities: string[] }[] };

/** `GET /v1/models` of a scheduler, its chat models only (agents add their whisper models). */
async function models(s: SchedulerHandle): Promise<Shape> {
  const body = (await (await fetch(`${httpBase(s)}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as Shape;
  return { data: body.data.filter((m) => m.owned_by !== "whisper"), models: body.models.filter((m) => !m.capabilities.includes("transcription")) };
}

const post = (s: SchedulerHandle, path: string, body: unknown) =>
  fetch(`${httpBase(s)}/v1/${path}`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
const chat = (s: SchedulerHandle, model: string) => postChat(httpBase(s), key, { model, messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 8, temperature: 0 });

describe("the operator's catalog", () => {
  it("lists its ids in data and models, with the aliases and each one's status in shape B", async () => {
    const listed = await models(first);
    expect(listed.data.map((m) => [m.id, m.owned_by])).toEqual([
      [MODEL_ID, "kiln"],
      ["house/big", "kiln"],
    ]);
    expect(listed.models.map((m) => ({ id: m.id, name: m.name, aliases: m.aliases, status: m.status }))).toEqual([
      { id: MODEL_ID, name: "House chat", aliases: ["house/chat", "gpt-4o"], status: "available" },
      { id: "house/big", name: "house/big", aliases: ["big"], status: "unavailable" },
    ]);
  });

  it("serves an alias as its model: the same greedy text, the answer naming the alias sent (chat, streamed chat, completions, embeddings); usage under the id", async () => {
    const byId = await chat(first, MODEL_ID);
    const byAlias = await chat(first, "gpt-4o");
    expect([byId.status, byAlias.status]).toEqual([200, 200]);
    expect(byAlias.body.choices[0].message.content).toBe(byId.body.choices[0].message.content);
    expect(byAlias.body.choices[0].message.content).not.toBe("");
    expect([byId.body.model, byAlias.body.model]).toEqual([MODEL_ID, "gpt-4o"]);

    const streamed = await post(first, "chat/completions", { model: "house/chat", messages: [{ role: "user", content: "Hi" }], max_tokens: 4, stream: true });
    const chunks = (await streamed.text())
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)) as { model: string });
    expect(chunks.length).toBeGreaterThan(1);
    expect(new Set(chunks.map((c) => c.model))).toEqual(new Set(["house/chat"]));

    const legacy = await post(first, "completions", { model: "gpt-4o", prompt: "Once upon", max_tokens: 3 });
    expect(legacy.status).toBe(200);
    expect(((await legacy.json()) as { model: string }).model).toBe("gpt-4o");
    const embeddings = await post(first, "embeddings", { model: "house/chat", input: "a" });
    expect(embeddings.status).toBe(200);
    expect(((await embeddings.json()) as { model: string }).model).toBe("house/chat");

    // the ledger knows one model, whatever name it was asked by
    await until(
      async () => {
        const usage = (await (await fetch(`${httpBase(first)}/v1/usage`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
          data: { model: string; requests: number }[];
        };
        return usage.data.reduce((n, d) => n + d.requests, 0) >= 5;
      },
      10_000,
      "the usage rows",
    );
    const usage = (await (await fetch(`${httpBase(first)}/v1/usage`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { model: string }[] };
    expect(new Set(usage.data.map((d) => d.model))).toEqual(new Set([MODEL_ID]));
  });

  it("refuses a name outside it, a built-in id included, with 400 model_not_found naming model; GET /v1/models/{id} takes an alias", async () => {
    for (const name of ["famC-k2", "gpt-4", "House/Chat"]) {
      const res = await chat(first, name);
      expect(res.status, name).toBe(400);
      expect(res.body.error).toMatchObject({ code: "model_not_found", param: "model", message: `model: "${name}" is not a model of this service (see GET /v1/models)` });
    }
    const one = (name: string) => fetch(`${httpBase(first)}/v1/models/${name}`, { headers: { authorization: `Bearer ${key}` } });
    expect(await (await one("big")).json()).toMatchObject({ id: "big", object: "model", owned_by: "kiln" });
    expect(await (await one("house/big")).json()).toMatchObject({ id: "house/big", object: "model" });
    expect((await one("famC-k2")).status).toBe(404);
  });

  it("is served by a second scheduler on the same database, which takes up an edit made through the first's dashboard API, then its removal", async () => {
    expect((await models(second)).models.map((m) => [m.id, m.aliases])).toEqual([
      [MODEL_ID, ["house/chat", "gpt-4o"]],
      ["house/big", ["big"]],
    ]);
    const edit = await fetch(`${httpBase(first)}/admin/api/catalog`, {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ models: [{ id: MODEL_ID, source: TINY_MODEL, aliases: ["renamed"] }] }),
    });
    expect(edit.status).toBe(200);
    // the scheduler that wrote it serves it at once; the other within its poll
    expect((await chat(first, "renamed")).status).toBe(200);
    await until(async () => (await models(second)).models.length === 1, 10_000, "the second scheduler to take up the edit");
    expect((await models(second)).models.map((m) => [m.id, m.aliases])).toEqual([[MODEL_ID, ["renamed"]]]);
    const renamed = await chat(second, "renamed");
    expect([renamed.status, renamed.body.model]).toEqual([200, "renamed"]);
    expect((await chat(second, "gpt-4o")).body.error.code).toBe("model_not_found");

    expect((await fetch(`${httpBase(first)}/admin/api/catalog`, { method: "DELETE", headers: { authorization: `Bearer ${ADMIN}` } })).status).toBe(204);
    await until(async () => (await models(second)).models.length === 8, 10_000, "the second scheduler to go back to the built-in ids");
    expect((await chat(second, MODEL_ID)).status).toBe(200);
    expect((await chat(second, "renamed")).status).toBe(400);
  }, 60_000);
});

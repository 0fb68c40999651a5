/**
 * What the Fleet takes from a node only within bounds it computes itself (docs/security.md, "A
 * node's trust"): usage clamped and counted, a node that keeps lying drained, routing by observed
 * speed, cache scopes no node can tie to an account name. Driven through the agent-side interface
 * with recording links; test/node-trust.test.ts tries the same over real gRPC.
 */
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import type { SchedulerMessage } from "../../proto/index.js";
import { audioSecondsBound, sizeBoundSeconds, wavSeconds } from "../audio/duration.js";
import { cacheScope, Fleet, routingCost, type FleetOptions } from "./fleet.js";
import { registerRefusal } from "./grpc-server.js";
import { completionTokenBound, PROMPT_OVERHEAD, promptTokenBound } from "./limits.js";
import { fastest, MAX_SLOWNESS, NodeSpeed, slowness } from "./speed.js";
import type { AgentLink, CompletionEvent } from "./types.js";
import { tempDir } from "../../test/helpers/temp.js";
import { nodeIdMatcher } from "../../config/index.js";
import { testDb } from "../../test/helpers/db.js";
import { openStore } from "../store/index.js";
import { KeyService } from "../auth/index.js";
import { wavFile } from "../../scripts/lib/media.js";
import { RecordingLink, servingNode } from "../../test/helpers/recording-link.js";

const register = (nodeId: string, slots: number, models = ["famB-v3.1"]) => servingNode(nodeId, slots, { models });

const fleet = (options: Partial<FleetOptions> = {}) => new Fleet({ queueSize: 8, queueTimeoutMs: 5000, heartbeatMs: 60_000, logger: createLogger("test", "silent"), ...options });
const request = { model: "famB-v3.1", messages: [{ role: "user" as const, content: "hi" }], maxTokens: 8 };

async function drain(events: AsyncIterable<CompletionEvent>): Promise<CompletionEvent[]> {
  const out: CompletionEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

/** Runs one request on node `id` (link `link`) which answers `done` with the given usage. */
async function answered(f: Fleet, id: string, link: RecordingLink, usage: { prompt_tokens: number; completion_tokens: number; cached_tokens: number }, told?: string[]) {
  const events = drain(f.submit({ ...request, onUsage: (u) => told?.push(`${u.promptTokens}+${u.completionTokens}`) }));
  const rid = link.requests().at(-1)!;
  f.receive(id, link, { body: "chunk", chunk: { request_id: rid, text: "hello", logprobs: [], index: 0, tool_calls: [] } });
  f.receive(id, link, { body: "done", done: { request_id: rid, finish_reason: "stop", usage, finish_reasons: [], stop_text: "" } });
  return (await events).find((e) => e.type === "done") as Extract<CompletionEvent, { type: "done" }>;
}

const LIE = { prompt_tokens: 4_000_000_000, completion_tokens: 4_000_000_000, cached_tokens: 4_000_000_000 };

describe("usage a node reports is clamped to the scheduler's bounds", () => {
  it("prompt tokens at most the prompt's bytes and template overhead, completion tokens at most max_tokens × n; the client and the ledger see the bound", async () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("liar", 4), a);
    const told: string[] = [];
    const done = await answered(f, "liar", a, LIE, told);
    const promptBound = 2 + PROMPT_OVERHEAD.perMessage + PROMPT_OVERHEAD.perRequest;
    expect(done).toMatchObject({ promptTokens: promptBound, completionTokens: 8, cachedTokens: promptBound });
    expect(told).toEqual([`${promptBound}+8`]);
    expect(f.rejectedReports()).toEqual(
      expect.arrayContaining([
        { node: "liar", kind: "prompt_tokens", count: 1 },
        { node: "liar", kind: "completion_tokens", count: 1 },
        { node: "liar", kind: "cached_tokens", count: 1 },
      ]),
    );
    // an honest report passes untouched and counts nothing
    const honest = await answered(f, "liar", a, { prompt_tokens: 9, completion_tokens: 8, cached_tokens: 0 });
    expect(honest).toMatchObject({ promptTokens: 9, completionTokens: 8 });
    expect(f.rejectedReports().reduce((n, r) => n + r.count, 0)).toBe(3);
    f.close();
  });

  it("a cancelled request's usage is clamped as well", () => {
    const f = fleet();
    const a = new RecordingLink();
    f.attach(register("a", 4), a);
    const told: string[] = [];
    const ac = new AbortController();
    f.submit({ ...request, onUsage: (u) => told.push(`${u.promptTokens}+${u.completionTokens}`) }, ac.signal);
    ac.abort();
    f.receive("a", a, { body: "error", error: { request_id: a.requests()[0]!, code: "cancelled", message: "cancelled", retryable: false, usage: LIE } });
    expect(told).toEqual([`${2 + PROMPT_OVERHEAD.perMessage + PROMPT_OVERHEAD.perRequest}+8`]);
    f.close();
  });

  it("the bounds: bytes (UTF-8) and overheads of every part the template renders; max_tokens, else the context, per choice", () => {
    expect(promptTokenBound({ model: "m", messages: [{ role: "user", content: "é" }] })).toBe(2 + PROMPT_OVERHEAD.perMessage + PROMPT_OVERHEAD.perRequest);
    expect(promptTokenBound({ model: "m", messages: [], prompt: "abc" })).toBe(3 + PROMPT_OVERHEAD.perRequest);
    expect(promptTokenBound({ model: "m", messages: [], embed: { inputs: ["ab", "c"] } })).toBe(3 + 2 * 16);
    const tools = promptTokenBound({ model: "m", messages: [{ role: "user", content: "" }], tools: [{ name: "f", description: "d" }] });
    expect(tools).toBe(JSON.stringify({ name: "f", description: "d" }).length + PROMPT_OVERHEAD.perTool + PROMPT_OVERHEAD.perMessage + PROMPT_OVERHEAD.perRequest);
    expect(completionTokenBound({ model: "m", messages: [], maxTokens: 8, n: 3 }, 2048)).toBe(24);
    expect(completionTokenBound({ model: "m", messages: [] }, 2048)).toBe(2048);
    expect(completionTokenBound({ model: "m", messages: [], embed: { inputs: ["x"] } }, 2048)).toBe(0);
  });
});

describe("what a node sends for one request is bounded in all", () => {
  it("log-probability entries past one per token and alternative, or text past 64 bytes a token: the request fails, the node gets a cancel, a count and a strike", async () => {
    const f = fleet();
    const link = new RecordingLink();
    f.attach({ ...register("liar", 4), pools: [{ ...register("liar", 4).pools[0]!, capabilities: ["logprobs"] }] }, link);
    const lp = (token: string) => ({ token, logprob: -1, top_logprobs: [{ token, logprob: -1, raw: Buffer.alloc(0) }], text_offset: 0, raw: Buffer.alloc(0) });
    // max_tokens 8, top_logprobs 1: at most 16 entries; 9 tokens of one byte each are 18
    const events = drain(f.submit({ ...request, logprobs: 1 }));
    const rid = link.requests().at(-1)!;
    for (let i = 0; i < 9; i++) f.receive("liar", link, { body: "chunk", chunk: { request_id: rid, text: "x", logprobs: [lp("x")], index: 0, tool_calls: [] } });
    await expect(events).rejects.toThrow(/sent more for this completion than it can hold \(over 1024 bytes or 16 log-probability entries/);
    expect(link.sent.some((m) => m.cancel?.request_id === rid)).toBe(true);
    // text: 8 tokens × 64 bytes
    const text = drain(f.submit(request));
    const rid2 = link.requests().at(-1)!;
    f.receive("liar", link, { body: "chunk", chunk: { request_id: rid2, text: "y".repeat(512), logprobs: [], index: 0, tool_calls: [] } });
    f.receive("liar", link, { body: "chunk", chunk: { request_id: rid2, text: "y", logprobs: [], index: 0, tool_calls: [] } });
    await expect(text).rejects.toThrow(/over 512 bytes/);
    expect(f.rejectedReports()).toEqual([{ node: "liar", kind: "completion_text", count: 2 }]);
    expect(f.snapshot()[0]!.observed.inflight).toBe(0); // the slots are free again
    f.close();
  });
});

describe("a node's last message is the answer its request asked for", () => {
  it("a stop text it names is kept only when the request gave it", async () => {
    const f = fleet();
    const link = new RecordingLink();
    f.attach(servingNode("n", 4, { capabilities: ["sampling", "stop_text"] }), link);
    const ended = async (stopText: string) => {
      const events = drain(f.submit({ ...request, sampling: { stop: ["END", "STOP"] }, nameStop: true }));
      const rid = link.requests().at(-1)!;
      f.receive("n", link, { body: "done", done: { request_id: rid, finish_reason: "stop", usage: null, finish_reasons: [], stop_text: stopText } });
      return (await events).find((e) => e.type === "done") as Extract<CompletionEvent, { type: "done" }>;
    };
    expect((await ended("STOP")).stopText).toBe("STOP");
    expect((await ended("anything else")).stopText).toBeUndefined();
    expect((await ended("")).stopText).toBeUndefined();
    f.close();
  });

  it("a request whose stop text must be named goes to a node that names it; with none serving the model (older agents), to another without its stops", () => {
    const f = fleet();
    const old = new RecordingLink();
    f.attach(servingNode("old", 1, { capabilities: ["sampling"] }), old);
    void drain(f.submit({ ...request, sampling: { stop: ["END"], topK: 5 }, nameStop: true })).catch(() => undefined);
    expect(old.sent.at(-1)!.completion).toMatchObject({ top_k: 5 });
    expect(old.sent.at(-1)!.completion).not.toHaveProperty("stop"); // the scheduler matches the stops itself
    const named = new RecordingLink();
    f.attach(servingNode("new", 1, { capabilities: ["sampling", "stop_text"] }), named);
    void drain(f.submit({ ...request, sampling: { stop: ["END"] }, nameStop: true })).catch(() => undefined);
    expect(named.sent.at(-1)!.completion).toMatchObject({ stop: ["END"] });
    void drain(f.submit({ ...request, sampling: { stop: ["END"] }, nameStop: true })).catch(() => undefined);
    expect(old.requests()).toHaveLength(1); // the named one waits for the node that names it
    f.close();
  });

  it("a completion answered with embeddings, or embeddings answered with a completion's done: the request fails naming the node, the node gets a cancel, a count and a strike", async () => {
    const f = fleet();
    const link = new RecordingLink();
    f.attach({ ...register("liar", 4), pools: [{ ...register("liar", 4).pools[0]!, capabilities: ["embeddings"] }] }, link);
    const completion = drain(f.submit(request));
    const rid = link.requests().at(-1)!;
    f.receive("liar", link, { body: "embeddings", embeddings: { request_id: rid, vectors: [{ values: [1, 2] }], prompt_tokens: 1 } });
    await expect(completion).rejects.toThrow("the node (liar) answered a completion with embeddings");
    expect(link.sent.some((m) => m.cancel?.request_id === rid)).toBe(true);
    const embeddings = drain(f.submit({ ...request, embed: { inputs: ["hi"] } }));
    const rid2 = link.requests().at(-1)!;
    f.receive("liar", link, {
      body: "done",
      done: { request_id: rid2, finish_reason: "stop", usage: { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
    });
    await expect(embeddings).rejects.toThrow("the node (liar) answered an embeddings request with a completion's end");
    expect(f.rejectedReports()).toEqual([{ node: "liar", kind: "answer_kind", count: 2 }]);
    expect(f.snapshot()[0]!.observed.inflight).toBe(0); // the slots are free again
    f.close();
  });
});

describe("a node that keeps reporting past the bounds is drained", () => {
  it("after 3 clamped reports in the window it gets no more work, shows as distrusted, and stays so when it reconnects", async () => {
    const f = fleet({ distrustAfter: 3 });
    const liar = new RecordingLink();
    const honest = new RecordingLink();
    f.attach(register("liar", 64), liar);
    await answered(f, "liar", liar, { ...LIE, prompt_tokens: 1, cached_tokens: 0 });
    await answered(f, "liar", liar, { ...LIE, prompt_tokens: 1, cached_tokens: 0 });
    expect(f.snapshot()[0]!.distrusted).toBeUndefined();
    await answered(f, "liar", liar, { ...LIE, prompt_tokens: 1, cached_tokens: 0 });
    expect(f.snapshot()[0]).toMatchObject({ nodeId: "liar", draining: true, distrusted: { reason: expect.stringContaining("3 reports") } });
    f.attach(register("honest", 1), honest);
    const before = liar.requests().length;
    void drain(f.submit(request)).catch(() => undefined);
    expect(liar.requests()).toHaveLength(before);
    expect(honest.requests()).toHaveLength(1);
    // the same id again: refused, and still listed as drained
    const again = new RecordingLink();
    expect(f.attach(register("liar", 64), again)).toMatchObject({ refused: expect.stringContaining("drained"), distrusted: true });
    expect(f.snapshot().find((a) => a.nodeId === "liar")).toMatchObject({ draining: true, distrusted: expect.anything() });
    f.close();
  });

  it("strikes and the drain are kept by node id and by the link's credential: a liar that reconnects between lies, or comes back under another id with the same token, is drained and refused", async () => {
    const f = fleet({ distrustAfter: 3 });
    const lie = { ...LIE, prompt_tokens: 1, cached_tokens: 0 };
    const link = (credential: string) => Object.assign(new RecordingLink(), { credential });
    // two lies, a reconnect (a new link, same token), a third lie: drained
    let l = link("digest-a");
    f.attach(register("liar", 4), l);
    await answered(f, "liar", l, lie);
    await answered(f, "liar", l, lie);
    f.detach("liar", l, "gone");
    l = link("digest-a");
    f.attach(register("liar", 4), l);
    await answered(f, "liar", l, lie);
    expect(f.snapshot()[0]).toMatchObject({ nodeId: "liar", distrusted: { reason: expect.stringContaining("3 reports") } });
    // gone, it is still listed; its id and its token are refused, another token's node is not
    f.detach("liar", l, "gone");
    expect(f.drainedAway()).toEqual([{ nodeId: "liar", distrusted: expect.objectContaining({ reason: expect.any(String) }), connectedAt: expect.any(Number) }]);
    expect(f.attach(register("liar", 4), link("digest-b"))).toMatchObject({ distrusted: true });
    expect(f.attach(register("liar-2", 4), link("digest-a"))).toMatchObject({ distrusted: true });
    expect(f.attach(register("honest", 4), link("digest-b"))).toEqual({ heartbeatMs: 60_000 });
    // strikes under one token add up across ids: three ids, one lie each
    const g = fleet({ distrustAfter: 3 });
    for (const id of ["x-1", "x-2", "x-3"]) {
      const c = link("digest-x");
      g.attach(register(id, 4), c);
      await answered(g, id, c, lie);
      g.detach(id, c, "gone");
    }
    expect(g.attach(register("x-4", 4), link("digest-x"))).toMatchObject({ distrusted: true });
    f.close();
    g.close();
  });
});

describe("routing weighs what the scheduler observes", () => {
  it("slowness: a node's TTFT over the best, or the best tokens/s over its own; 1 without observations", () => {
    const fast = new NodeSpeed();
    const slow = new NodeSpeed();
    const fresh = new NodeSpeed();
    fast.firstText(100);
    fast.generated(50);
    slow.firstText(400);
    slow.generated(50);
    const best = fastest([fast, slow, fresh]);
    expect(slowness(fast, best)).toBe(1);
    expect(slowness(slow, best)).toBe(4);
    expect(slowness(fresh, best)).toBe(1);
    const sluggish = new NodeSpeed();
    sluggish.firstText(100);
    sluggish.generated(20);
    expect(slowness(sluggish, fastest([fast, sluggish]))).toBe(2.5);
    // clamped: a node 500 times slower than the best counts as MAX_SLOWNESS slower
    const crawling = new NodeSpeed();
    crawling.firstText(50_000);
    expect(slowness(crawling, fastest([fast, crawling]))).toBe(MAX_SLOWNESS);
    // observations older than the window are forgotten
    const old = new NodeSpeed();
    old.firstText(10_000, Date.now() - 120_000);
    expect(old.ttftMs()).toBeUndefined();
  });

  it("the cost: the share in use as before among nodes alike; a node twice as slow only once the fast one is full", () => {
    expect(routingCost({ inflight: 1, local: 0, slots: 4 }, 1)).toBe(0.25);
    expect(routingCost({ inflight: 0, local: 0, slots: 64 }, 2)).toBe(1);
    expect(routingCost({ inflight: 3, local: 0, slots: 4 }, 1)).toBeLessThan(1);
  });

  it("a node claiming many slots but answering slowly draws less work than a fast one with few", async () => {
    const f = fleet({ queueSize: 64 });
    const big = new RecordingLink();
    const small = new RecordingLink();
    f.attach(register("big", 64), big);
    f.attach(register("small", 4), small);
    const answer = (id: string, link: RecordingLink, rid: string) => {
      f.receive(id, link, { body: "chunk", chunk: { request_id: rid, text: "x", logprobs: [], index: 0, tool_calls: [] } });
      f.receive(id, link, {
        body: "done",
        done: { request_id: rid, finish_reason: "stop", usage: { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
      });
    };
    // without observations, by the share in use: the 64-slot claim first, then the idle one
    void drain(f.submit(request));
    void drain(f.submit(request));
    expect([big.requests().length, small.requests().length]).toEqual([1, 1]);
    // small answers at once; big's first text comes after 200 ms
    answer("small", small, small.requests()[0]!);
    await new Promise((r) => setTimeout(r, 200));
    answer("big", big, big.requests()[0]!);
    // now the fast node takes the work until it is full, the slow one only beyond
    for (let i = 0; i < 4; i++) void drain(f.submit(request)).catch(() => undefined);
    expect(small.requests().length).toBe(1 + 4);
    expect(big.requests().length).toBe(1);
    f.close();
  });

  it("a node with a 1 ms TTFT that never completes does not take more than its share", async () => {
    const f = fleet({ queueSize: 64 });
    const liar = new RecordingLink();
    const honest = new RecordingLink();
    f.attach(register("liar", 8), liar);
    f.attach(register("honest", 8), honest);
    const text = (id: string, link: RecordingLink, rid: string) =>
      f.receive(id, link, { body: "chunk", chunk: { request_id: rid, text: "x", logprobs: [], index: 0, tool_calls: [] } });
    // a few requests each: the liar sends a byte at once and then fails them (never a done); the honest node answers after 50 ms
    for (let i = 0; i < 4; i++) void drain(f.submit(request)).catch(() => undefined);
    expect([liar.requests().length, honest.requests().length]).toEqual([2, 2]);
    for (const rid of liar.requests()) {
      text("liar", liar, rid);
      f.receive("liar", liar, { body: "error", error: { request_id: rid, code: "agent_error", message: "gone", retryable: false, usage: null } });
    }
    await new Promise((r) => setTimeout(r, 50));
    for (const rid of honest.requests()) {
      text("honest", honest, rid);
      f.receive("honest", honest, {
        body: "done",
        done: { request_id: rid, finish_reason: "stop", usage: { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 }, finish_reasons: [], stop_text: "" },
      });
    }
    // both idle, 8 slots each: 8 requests split evenly (its 1 ms TTFT counted, it would take all 8)
    for (let i = 0; i < 8; i++) void drain(f.submit(request)).catch(() => undefined);
    expect([liar.requests().length - 2, honest.requests().length - 2]).toEqual([4, 4]);
    f.close();
  });
});

describe("Register claims within the token's grant", () => {
  const token = (models: string[] | undefined, slots: number) => ({ offers: nodeIdMatcher(models), slots });
  it("refuses slots past the cap, a model the token does not allow and an impossible context", () => {
    expect(registerRefusal(register("n", 4), token(undefined, 64))).toBeUndefined();
    expect(registerRefusal(register("n", 4_294_967_295), token(undefined, 64))).toMatch(/4294967295 slots claimed; .* at most 64/);
    expect(registerRefusal(register("n", 4, ["famB-v3.1", "other"]), token(["famB-*"], 64))).toMatch(/may not offer model "other"/);
    expect(
      registerRefusal(
        { ...register("n", 4), transcription: { models: ["large-v3"], default_model: "large-v3", slots: 1, capabilities: [], max_file_bytes: 0, on_demand_models: [] } },
        token(["famB-v3.1"], 64),
      ),
    ).toMatch(/may not offer model "large-v3"/);
    const wide = register("n", 4);
    wide.pools[0]!.context_size = 4_000_000_000;
    expect(registerRefusal(wide, token(undefined, 64))).toMatch(/context of 4000000000/);
  });
});

describe("cache_scope", () => {
  it("is an HMAC under the scheduler's key: not the plain hash of the account name, the same under the same key, another under another", () => {
    const key = Buffer.alloc(32, 7);
    const plain = createHash("sha256").update("kiln-cache-scope\0acme").digest("base64url").slice(0, 22);
    expect(cacheScope(key, "acme")).not.toBe(plain);
    expect(cacheScope(key, "acme")).toBe(cacheScope(Buffer.alloc(32, 7), "acme"));
    expect(cacheScope(Buffer.alloc(32, 8), "acme")).not.toBe(cacheScope(key, "acme"));
    expect(cacheScope(key, "acme")).not.toBe(cacheScope(key, "acme2"));
  });

  it("schedulers sharing a database derive the same key (from the signing secret kept there), which is not the signing secret; another database, another", async () => {
    const db = testDb();
    const stores = await Promise.all([openStore(db, { logger: createLogger("test", "silent") }), openStore(db, { logger: createLogger("test", "silent") })]);
    const other = await openStore(testDb(), { logger: createLogger("test", "silent") });
    try {
      const [a, b] = await Promise.all(stores.map((st) => KeyService.open(st)));
      const c = await KeyService.open(other);
      expect(cacheScope(a!.derivedKey("cache-scope"), "acme")).toBe(cacheScope(b!.derivedKey("cache-scope"), "acme"));
      expect(cacheScope(c.derivedKey("cache-scope"), "acme")).not.toBe(cacheScope(a!.derivedKey("cache-scope"), "acme"));
      expect(a!.derivedKey("cache-scope").equals(a!.derivedKey("other"))).toBe(false);
      // a --jwt-secret: every scheduler given it derives the same key
      await expect(KeyService.open(other, "s".repeat(32)).then((k) => k.derivedKey("cache-scope").toString("hex"))).resolves.toBe(
        (await KeyService.open(stores[0]!, "s".repeat(32))).derivedKey("cache-scope").toString("hex"),
      );
    } finally {
      for (const st of [...stores, other]) await st.close();
    }
  });

  it("the fleet sends each account's under its key, the same for an account's every request", () => {
    const key = Buffer.alloc(32, 9);
    const f = fleet({ cacheScopeKey: key });
    const a = new RecordingLink();
    f.attach(register("a", 4), a);
    for (const account of ["acme", "globex", "acme"]) void drain(f.submit({ ...request, account }));
    expect(a.sent.filter((m) => m.completion).map((m) => m.completion!.cache_scope)).toEqual([cacheScope(key, "acme"), cacheScope(key, "globex"), cacheScope(key, "acme")]);
    f.close();
  });
});

describe("audio seconds bound", () => {
  const wav = wavFile;

  it("a WAV file's header gives its duration (plus a second); anything else its size at 4 kbit/s", async () => {
    const w = wav(3);
    expect(wavSeconds(w, w.length)).toBe(3);
    const dir = tempDir();
    writeFileSync(join(dir, "a.wav"), w);
    expect(await audioSecondsBound(join(dir, "a.wav"), w.length)).toBe(4);
    writeFileSync(join(dir, "a.mp3"), Buffer.alloc(10_000));
    expect(await audioSecondsBound(join(dir, "a.mp3"), 10_000)).toBe(sizeBoundSeconds(10_000));
    expect(sizeBoundSeconds(10_000)).toBe(20);
  });

  it("a header that does not add up gets the size-based bound: a byte rate of 0xFFFFFFFF, a 2-byte first data chunk before the real data, a float format or a block align that lie", async () => {
    const dir = tempDir();
    const bound = async (name: string, bytes: Buffer) => {
      writeFileSync(join(dir, name), bytes);
      return audioSecondsBound(join(dir, name), bytes.length);
    };
    const huge = wav(3);
    huge.writeUInt32LE(0xffffffff, 28);
    expect(wavSeconds(huge, huge.length)).toBeUndefined();
    expect(await bound("huge.wav", huge)).toBe(sizeBoundSeconds(huge.length));
    // a first data chunk of 2 bytes, then the real data (its own chunk, or none)
    const real = wav(3);
    const split = Buffer.concat([real.subarray(0, 40), Buffer.from([2, 0, 0, 0, 0, 0]), Buffer.from("data"), Buffer.alloc(4, 0xff), real.subarray(44)]);
    expect(await bound("split.wav", split)).toBe(sizeBoundSeconds(split.length));
    const bare = Buffer.concat([real.subarray(0, 40), Buffer.from([2, 0, 0, 0]), real.subarray(44)]);
    expect(await bound("bare.wav", bare)).toBe(sizeBoundSeconds(bare.length));
    const align = wav(3);
    align.writeUInt16LE(200, 32);
    align.writeUInt32LE(16_000 * 200, 28);
    expect(await bound("align.wav", align)).toBe(sizeBoundSeconds(align.length));
    const compressed = wav(3);
    compressed.writeUInt16LE(0x55, 20); // MP3 in a WAV: its byte rate is the encoder's, not sampleRate × blockAlign
    expect(await bound("mp3.wav", compressed)).toBe(sizeBoundSeconds(compressed.length));
    // a small trailing chunk after the data still counts as consistent; a streamed length of 0 too
    const trailing = Buffer.concat([real, Buffer.from("LIST"), Buffer.from([8, 0, 0, 0]), Buffer.alloc(8)]);
    expect(await bound("trailing.wav", trailing)).toBe(5); // 3 s and the 16 bytes past it, rounded up, plus a second
    const streamed = Buffer.from(real);
    streamed.writeUInt32LE(0, 40);
    expect(await bound("streamed.wav", streamed)).toBe(4);
  });
});

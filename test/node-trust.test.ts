/**
 * A node holding a valid node token, lying: it claims more slots or models than its token allows,
 * reports billions of tokens or hours of audio for small requests, sends messages of 100 MB. Each
 * lie is refused, or clamped to a bound the scheduler computed itself, counted and logged; a node
 * that keeps lying is drained, and an honest node beside it keeps serving. The liar is a hand-made
 * gRPC client with a valid token (as in fleet-security.test.ts); the honest node a real agent. Every
 * attack here is listed in docs/security.md, "A node's trust".
 */
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { formatHostPort } from "../config/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { PROMPT_OVERHEAD } from "../scheduler/fleet/limits.js";
import { connectLiar, LIE, type LiarLink, type LiarOptions } from "../scripts/lib/liar.js";
import { fleetProto, NODE_TOKEN_METADATA } from "../proto/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, NODE_TOKEN, postChat, until } from "./helpers/fleet.js";
import { wavFile } from "../scripts/lib/media.js";
import { STOP_USAGE_WAIT_MS } from "../scheduler/http/routes/messages.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const ADMIN = "admin-token-for-node-trust-tests";

/** A lying node (scripts/lib/liar.ts) on `scheduler` with the test token, closed after the test; by default it offers MODEL_ID on 4 slots. */
function liar(scheduler: SchedulerHandle, nodeId: string, options: Omit<LiarOptions, "grpc" | "token" | "nodeId" | "model"> & { token?: string } = {}): LiarLink {
  const link = connectLiar({ grpc: formatHostPort(scheduler.grpc), token: NODE_TOKEN, nodeId, model: MODEL_ID, ...options });
  cleanups.push(async () => link.close());
  return link;
}

/** `promise`, or a failure after `ms`. */
function within<T>(promise: Promise<T>, ms = 10_000): Promise<T> {
  return Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms))]);
}

async function key(scheduler: SchedulerHandle, account: string): Promise<string> {
  return (await scheduler.keys.create({ account, tier: "pro" })).token;
}

async function usageOf(scheduler: SchedulerHandle, token: string): Promise<{ requests: number; prompt_tokens: number; completion_tokens: number; audio_seconds: number }> {
  const res = await fetch(`${httpBase(scheduler)}/v1/usage`, { headers: { authorization: `Bearer ${token}` } });
  const body = (await res.json()) as { data: { requests: number; prompt_tokens: number; completion_tokens: number; audio_seconds: number }[] };
  const sum = (k: "requests" | "prompt_tokens" | "completion_tokens" | "audio_seconds") => body.data.reduce((n, d) => n + d[k], 0);
  return { requests: sum("requests"), prompt_tokens: sum("prompt_tokens"), completion_tokens: sum("completion_tokens"), audio_seconds: sum("audio_seconds") };
}

async function rejectedMetric(scheduler: SchedulerHandle, node: string, kind: string): Promise<number> {
  const text = await (await fetch(`${httpBase(scheduler)}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("kiln_node_reports_rejected_total{") && l.includes(`node="${node}"`) && l.includes(`kind="${kind}"`));
  return line ? Number(line.split(" ").pop()) : 0;
}

/** A 16 kHz 16-bit mono PCM WAV of `seconds` of silence, as a fetch body takes it. */
const wav = (seconds: number): Uint8Array<ArrayBuffer> => new Uint8Array(wavFile(seconds));

describe("what a node may register is the operator's", () => {
  it("a claim of 4,294,967,295 slots is refused at Register, with the reason; within --max-node-slots it registers", async () => {
    const scheduler = await inProcessScheduler({ maxNodeSlots: "8" });
    cleanups.push(() => scheduler.close());
    const greedy = liar(scheduler, "greedy", { register: { pools: [{ model_ids: [MODEL_ID], slots: 4_294_967_295, context_size: 2048 }] } });
    expect(await greedy.outcome).toBe(grpc.status.PERMISSION_DENIED);
    expect((await greedy.ended).details).toMatch(/4294967295 slots claimed; this node token allows at most 8 per node/);
    // the pools together count: two of 5 are 10
    const split = liar(scheduler, "split", {
      register: {
        pools: [
          { model_ids: [MODEL_ID], slots: 5, context_size: 2048 },
          { model_ids: ["other"], slots: 5, context_size: 2048 },
        ],
      },
    });
    expect(await split.outcome).toBe(grpc.status.PERMISSION_DENIED);
    expect(await liar(scheduler, "modest", { register: { pools: [{ model_ids: [MODEL_ID], slots: 8, context_size: 2048 }] } }).outcome).toBe("registered");
    expect(scheduler.fleet.snapshot().map((a) => a.nodeId)).toEqual(["modest"]);
  });

  it("a model the token does not allow is refused, as are slots past the token's own cap and a node id that is not one", async () => {
    const scheduler = await inProcessScheduler({ nodeTokens: `chat-*;models:famB-*;slots:2=${NODE_TOKEN}` });
    cleanups.push(() => scheduler.close());
    const other = liar(scheduler, "chat-1", { register: { pools: [{ model_ids: [MODEL_ID, "gpt-4o"], slots: 2, context_size: 2048 }] } });
    expect(await other.outcome).toBe(grpc.status.PERMISSION_DENIED);
    expect((await other.ended).details).toMatch(/may not offer model "gpt-4o"/);
    const whisper = liar(scheduler, "chat-2", {
      register: {
        transcription: { models: ["tiny"], default_model: "tiny", slots: 1, max_file_bytes: 1024 ** 3 },
        pools: [{ model_ids: [MODEL_ID], slots: 2, context_size: 2048 }],
      },
    });
    expect(await whisper.outcome).toBe(grpc.status.PERMISSION_DENIED);
    expect(await liar(scheduler, "chat-3", { register: { pools: [{ model_ids: [MODEL_ID], slots: 3, context_size: 2048 }] } }).outcome).toBe(grpc.status.PERMISSION_DENIED);
    expect(await liar(scheduler, "chat-4", { register: { pools: [{ model_ids: [MODEL_ID], slots: 2, context_size: 2048 }] } }).outcome).toBe("registered");
    expect(await liar(scheduler, `chat-${"x".repeat(200)}`).outcome).toBe(grpc.status.INVALID_ARGUMENT);
    // a real agent refused for its slots logs why and never joins
    const agent = await inProcessAgent(scheduler, { nodeId: "chat-5", sequences: "4" });
    cleanups.push(() => agent.close());
    await until(() => agent.links!.links[0]!.state === "disconnected" || agent.links!.links[0]!.state === "connecting", 5000);
    await new Promise((r) => setTimeout(r, 300));
    expect(scheduler.fleet.snapshot().map((a) => a.nodeId)).toEqual(["chat-4"]);
  });
});

describe("usage is charged within the scheduler's bounds", () => {
  it("a node reporting 4,000,000,000 tokens per answer: the client, the ledger and /v1/usage show the bound; each report counted; after 3 it is drained and the honest node serves", async () => {
    // the liar holds a token of its own: the drain refuses its token too, so a node sharing it could not join
    const LIAR_TOKEN = `${NODE_TOKEN}-liar`;
    const scheduler = await inProcessScheduler({ adminToken: ADMIN, nodeTokens: `${NODE_TOKEN},liar=${LIAR_TOKEN}` });
    cleanups.push(() => scheduler.close());
    const lying = liar(scheduler, "liar", { token: LIAR_TOKEN, register: { pools: [{ model_ids: [MODEL_ID], slots: 64, context_size: 2048 }] } });
    expect(await lying.outcome).toBe("registered");
    const token = await key(scheduler, "tenant");
    const content = "How many tokens?";
    const promptBound = content.length + PROMPT_OVERHEAD.perMessage + PROMPT_OVERHEAD.perRequest;
    for (let i = 0; i < 3; i++) {
      const res = await postChat(httpBase(scheduler), token, { model: MODEL_ID, messages: [{ role: "user", content }], max_tokens: 8 });
      expect(res.status).toBe(200);
      expect(res.body.usage).toMatchObject({ prompt_tokens: promptBound, completion_tokens: 8 });
    }
    expect(await usageOf(scheduler, token)).toMatchObject({ requests: 3, prompt_tokens: 3 * promptBound, completion_tokens: 3 * 8 });
    expect(await rejectedMetric(scheduler, "liar", "completion_tokens")).toBe(3);
    expect(await rejectedMetric(scheduler, "liar", "prompt_tokens")).toBe(3);
    // drained: listed as such, and no more work
    expect(scheduler.fleet.snapshot().find((a) => a.nodeId === "liar")).toMatchObject({ draining: true, distrusted: { reason: expect.stringContaining("3 reports") } });
    const nodes = await (await fetch(`${httpBase(scheduler)}/admin/api/nodes`, { headers: { authorization: `Bearer ${ADMIN}` } })).json();
    expect(nodes.data).toEqual([expect.objectContaining({ node_id: "liar", draining: true, distrusted: expect.objectContaining({ reason: expect.any(String) }) })]);
    const honest = await inProcessAgent(scheduler, { nodeId: "honest" });
    cleanups.push(() => honest.close());
    await until(() => scheduler.fleet.snapshot().some((a) => a.nodeId === "honest"), 15_000, "the honest node to join");
    for (let i = 0; i < 4; i++) {
      const res = await postChat(httpBase(scheduler), token, { model: MODEL_ID, messages: [{ role: "user", content: "Hello" }], max_tokens: 4, temperature: 0 });
      expect(res.status).toBe(200);
      expect(res.body.choices[0].message.content).not.toBe("lies");
    }
    expect(lying.completions).toBe(3);
  });

  it("a node sending many 1 MiB chunks for one request with max_tokens 8: the request fails with a clear error, the job is cancelled on the node, the node counted", async () => {
    const scheduler = await inProcessScheduler({ adminToken: ADMIN });
    cleanups.push(() => scheduler.close());
    const flooding = liar(scheduler, "flood", { flood: { chunks: 64, bytes: 1024 * 1024 } });
    expect(await flooding.outcome).toBe("registered");
    const token = await key(scheduler, "flooded");
    const res = await postChat(httpBase(scheduler), token, { model: MODEL_ID, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toMatch(/the node \(flood\) sent more for this completion than it can hold \(over 512 bytes/);
    expect(await rejectedMetric(scheduler, "flood", "completion_text")).toBe(1);
    await until(() => flooding.cancels.length === 1, 5000, "the job to be cancelled on the node");
    // the rest of its flood is dropped (the job is gone): still one count, and the scheduler answers
    expect((await fetch(`${httpBase(scheduler)}/healthz`)).status).toBe(200);
    expect(await rejectedMetric(scheduler, "flood", "completion_text")).toBe(1);
    expect(await usageOf(scheduler, token)).toMatchObject({ completion_tokens: 0 });
  });

  it.each([
    ["typed, as a current node sends it", "typed"],
    ["as JSON text, as a node from before typed transcripts sends it", "json"],
  ] as const)("a transcript of 4,000,000,000 seconds for a 2 s WAV upload (%s) is charged 3 s (its header's duration and a second), counted", async (_, transcripts) => {
    const scheduler = await inProcessScheduler();
    cleanups.push(() => scheduler.close());
    const lying = liar(scheduler, "ear", { transcripts, register: { transcription: { models: ["tiny"], default_model: "tiny", slots: 1, max_file_bytes: 1024 ** 3 } } });
    expect(await lying.outcome).toBe("registered");
    const token = await key(scheduler, "listener");
    const form = new FormData();
    form.append("model", "whisper-1");
    form.append("response_format", "verbose_json");
    form.append("file", new Blob([wav(2)]), "a.wav");
    const res = await fetch(`${httpBase(scheduler)}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form });
    expect(res.status).toBe(200);
    expect((await res.json()).duration).toBe(3);
    expect(await usageOf(scheduler, token)).toMatchObject({ requests: 1, audio_seconds: 3 });
    expect(await rejectedMetric(scheduler, "ear", "audio_seconds")).toBe(1);
  });

  it("a WAV header that lies (byte rate 0xFFFFFFFF; a 2-byte first data chunk before the real data) gets the size-based bound: an honest node's true report is neither clamped nor struck, and clamps never drain", async () => {
    const scheduler = await inProcessScheduler();
    cleanups.push(() => scheduler.close());
    const token = await key(scheduler, "crafty");
    const transcribe = async (file: Uint8Array<ArrayBuffer>) => {
      const form = new FormData();
      form.append("model", "whisper-1");
      form.append("response_format", "verbose_json");
      form.append("file", new Blob([file]), "a.wav");
      const res = await fetch(`${httpBase(scheduler)}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form });
      expect(res.status).toBe(200);
      return (await res.json()).duration as number;
    };
    const huge = wav(4);
    new DataView(huge.buffer).setUint32(28, 0xffffffff, true);
    const real = wav(4);
    const split = new Uint8Array(real.length + 10);
    split.set(real.subarray(0, 40));
    split.set([2, 0, 0, 0, 0, 0], 40);
    split.set(Buffer.from("data"), 46);
    split.set([0xff, 0xff, 0xff, 0xff], 50);
    split.set(real.subarray(44), 54);
    // an honest node reports the 4 s it heard (the old header bound: 2): under the size-based bound, so charged as reported, never counted
    const honest = liar(scheduler, "honest-ear", { duration: 4, register: { transcription: { models: ["tiny"], default_model: "tiny", slots: 1, max_file_bytes: 1024 ** 3 } } });
    expect(await honest.outcome).toBe("registered");
    for (const file of [huge, split, huge]) expect(await transcribe(file)).toBe(4);
    expect(await rejectedMetric(scheduler, "honest-ear", "audio_seconds")).toBe(0);
    expect(scheduler.fleet.snapshot().find((a) => a.nodeId === "honest-ear")).toMatchObject({ draining: false });
    honest.close();
    await until(() => scheduler.fleet.snapshot().length === 0, 5000, "the honest node to leave");
    // a node whose reports are clamped is counted each time but not drained: the bound rests on the tenant's bytes
    const lying = liar(scheduler, "tall-ear", { register: { transcription: { models: ["tiny"], default_model: "tiny", slots: 1, max_file_bytes: 1024 ** 3 } } });
    expect(await lying.outcome).toBe("registered");
    for (let i = 0; i < 4; i++) expect(await transcribe(wav(2))).toBe(3);
    expect(await rejectedMetric(scheduler, "tall-ear", "audio_seconds")).toBe(4);
    expect(scheduler.fleet.snapshot().find((a) => a.nodeId === "tall-ear")).toMatchObject({ draining: false });
    expect(scheduler.fleet.snapshot().find((a) => a.nodeId === "tall-ear")?.distrusted).toBeUndefined();
  });
});

describe("a message past its kind's cap is refused before it is decoded", () => {
  it("a 20 MiB heartbeat-kind message (its body not even protobuf) closes that link, named by kind and size; another node keeps serving", async () => {
    const scheduler = await inProcessScheduler();
    cleanups.push(() => scheduler.close());
    const steady = liar(scheduler, "steady", { usage: { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 } });
    expect(await steady.outcome).toBe("registered");
    // a raw stream: its messages go out as the bytes given
    const connect = fleetProto().kiln.v1.Fleet.service.Connect;
    const client = new grpc.Client(formatHostPort(scheduler.grpc), grpc.credentials.createInsecure());
    cleanups.push(async () => client.close());
    const metadata = new grpc.Metadata();
    metadata.set(NODE_TOKEN_METADATA, `Bearer ${NODE_TOKEN}`);
    const call = client.makeBidiStreamRequest<Buffer, Buffer>(
      connect.path,
      (b) => b,
      (b) => b,
      metadata,
    );
    const ended = new Promise<grpc.StatusObject>((r) => call.on("status", r));
    call.on("error", () => undefined);
    call.on("data", () => undefined);
    call.write(connect.requestSerialize({ register: { node_id: "heavy", agent_version: "raw", pools: [{ model_ids: [MODEL_ID], slots: 1, context_size: 2048 }] } }));
    await until(() => scheduler.fleet.snapshot().some((a) => a.nodeId === "heavy"), 5000, "the raw node to join");
    // field 2 (heartbeat), length-delimited, 20 MiB of 0xFF: no decoder could read it
    const body = Buffer.alloc(20 * 1024 * 1024, 0xff);
    const length = [];
    for (let n = body.length; ; n >>>= 7) {
      if (n < 0x80) {
        length.push(n);
        break;
      }
      length.push((n & 0x7f) | 0x80);
    }
    const message = Buffer.concat([Buffer.from([(2 << 3) | 2, ...length]), body]);
    call.write(message);
    const status = await within(ended);
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(status.details).toBe(`a heartbeat message of ${message.length} bytes; the scheduler takes at most 16384`);
    expect(await rejectedMetric(scheduler, "heavy", "oversized_message")).toBe(1);
    await until(() => !scheduler.fleet.snapshot().some((a) => a.nodeId === "heavy"), 5000, "the raw node to be gone");
    const token = await key(scheduler, "bystander");
    expect((await postChat(httpBase(scheduler), token, { model: MODEL_ID, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 })).status).toBe(200);
    expect(steady.completions).toBe(1);
  });
});

describe("the drain cannot be escaped", () => {
  it("by reconnecting: a liar that lies twice, reconnects and lies again is drained; its id, and another under the same glob token, are then refused at Register; three oversized messages over three reconnects drain", async () => {
    const OTHER = `${NODE_TOKEN}-other`;
    const scheduler = await inProcessScheduler({ adminToken: ADMIN, nodeTokens: `liar-*=${NODE_TOKEN},big-*=${OTHER}` });
    cleanups.push(() => scheduler.close());
    const token = await key(scheduler, "tenant");
    const ask = async () => expect((await postChat(httpBase(scheduler), token, { model: MODEL_ID, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 })).status).toBe(200);
    const gone = (id: string) => until(() => !scheduler.fleet.snapshot().some((a) => a.nodeId === id), 5000, `${id} to leave`);
    let lying = liar(scheduler, "liar-1");
    expect(await lying.outcome).toBe("registered");
    await ask();
    await ask();
    lying.close();
    await gone("liar-1");
    lying = liar(scheduler, "liar-1");
    expect(await lying.outcome).toBe("registered");
    await ask();
    expect(scheduler.fleet.snapshot().find((a) => a.nodeId === "liar-1")).toMatchObject({ draining: true, distrusted: { reason: expect.stringContaining("3 reports") } });
    lying.close();
    await gone("liar-1");
    for (const id of ["liar-1", "liar-2"]) {
      const again = liar(scheduler, id);
      expect(await again.outcome).toBe(grpc.status.PERMISSION_DENIED);
      expect((await again.ended).details).toMatch(/was drained for reports past the scheduler's bounds: 3 reports/);
    }
    // the dashboard still lists it, though it is gone
    const nodes = await (await fetch(`${httpBase(scheduler)}/admin/api/nodes`, { headers: { authorization: `Bearer ${ADMIN}` } })).json();
    expect(nodes.data).toEqual([
      expect.objectContaining({ node_id: "liar-1", connected: false, draining: true, distrusted: expect.objectContaining({ reason: expect.any(String) }) }),
    ]);

    // each oversized message closes the link; the third, over three reconnects, drains
    for (let i = 0; i < 3; i++) {
      const big = liar(scheduler, "big-1", { token: OTHER });
      expect(await big.outcome).toBe("registered");
      big.write({ heartbeat: { busy_slots: new Array(1_250_000).fill(7) } });
      expect((await within(big.ended)).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      await gone("big-1");
    }
    expect(await rejectedMetric(scheduler, "big-1", "oversized_message")).toBe(3);
    expect(await liar(scheduler, "big-1", { token: OTHER }).outcome).toBe(grpc.status.PERMISSION_DENIED);
    expect(await liar(scheduler, "big-2", { token: OTHER }).outcome).toBe(grpc.status.PERMISSION_DENIED);
  });
});

describe("a message cannot stop the scheduler", () => {
  it("a 100 MB message from a node closes its link only: another node keeps serving and the scheduler keeps answering; a 1 MB heartbeat (past its kind's cap) likewise", async () => {
    const scheduler = await inProcessScheduler();
    cleanups.push(() => scheduler.close());
    const honest = await inProcessAgent(scheduler, { nodeId: "honest" });
    cleanups.push(() => honest.close());
    const token = await key(scheduler, "bystander");
    const big = liar(scheduler, "big");
    expect(await big.outcome).toBe("registered");
    await until(() => scheduler.fleet.snapshot().length === 2, 15_000, "both nodes to join");
    big.write({ chunk: { request_id: "x", text: "a".repeat(100 * 1024 * 1024) } });
    expect((await within(big.ended)).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    await until(() => scheduler.fleet.snapshot().length === 1, 5000, "the big node to be gone");
    expect((await fetch(`${httpBase(scheduler)}/healthz`)).status).toBe(200);
    const res = await postChat(httpBase(scheduler), token, { model: MODEL_ID, messages: [{ role: "user", content: "Hello" }], max_tokens: 4, temperature: 0 });
    expect(res.status).toBe(200);

    const chatty = liar(scheduler, "chatty");
    expect(await chatty.outcome).toBe("registered");
    chatty.write({ heartbeat: { busy_slots: new Array(1_250_000).fill(7) } });
    const status = await within(chatty.ended);
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(status.details).toMatch(/heartbeat message of \d+ bytes; the scheduler takes at most 16384/);
    expect(await rejectedMetric(scheduler, "chatty", "oversized_message")).toBe(1);
    expect(scheduler.fleet.snapshot().map((a) => a.nodeId)).toEqual(["honest"]);
    expect((await postChat(httpBase(scheduler), token, { model: MODEL_ID, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 })).status).toBe(200);
  });
});

describe("a reply cut at a stop sequence by the scheduler", () => {
  it(
    "waits STOP_USAGE_WAIT_MS for the node's count of what it generated, then fails the request (Anthropic's api_error, naming why) and bills nothing it cannot count",
    { timeout: 30_000 },
    async () => {
      const scheduler = await inProcessScheduler();
      cleanups.push(() => scheduler.close());
      // an older agent's pool (no stop_text capability): the scheduler matches the stop itself; this node then never answers the cancel
      const silent = liar(scheduler, "silent", { flood: { chunks: 3, bytes: 8 } });
      expect(await silent.outcome).toBe("registered");
      const token = await key(scheduler, "stopped");
      const started = Date.now();
      const res = await fetch(`${httpBase(scheduler)}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": token, "anthropic-version": "2023-06-01", "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL_ID, max_tokens: 64, stop_sequences: ["xx"], messages: [{ role: "user", content: "Hi" }] }),
      });
      const waited = Date.now() - started;
      expect(res.status).toBe(500); // Anthropic's api_error: the node's fault, not the client's
      expect(await res.json()).toMatchObject({ type: "error", error: { type: "api_error", message: expect.stringMatching(/did not say what it had generated/) } });
      expect(waited).toBeGreaterThanOrEqual(STOP_USAGE_WAIT_MS - 100); // it waited for the count, not less
      expect((await usageOf(scheduler, token)).completion_tokens).toBe(0);
    },
  );
});

/**
 * The fleet link carries what the HTTP API accepts: grpc-js's default 4 MiB message limit was below
 * a --max-body prompt, and an agent's link broke on it (every request on that agent failed with it).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, postChat, waitForAgents } from "./helpers/fleet.js";

let scheduler: SchedulerHandle;
let agent: AgentHandle;
let key: string;

beforeAll(async () => {
  scheduler = await inProcessScheduler({ maxBody: "8mb" });
  agent = await inProcessAgent(scheduler);
  await waitForAgents(scheduler, 1);
  key = (await scheduler.keys.create({ account: "big", tier: "standard" })).token;
}, 60_000);
afterAll(async () => {
  await agent?.close();
  await scheduler?.close();
});

describe("fleet messages over 4 MiB", () => {
  it("a 5 MB prompt reaches the agent, which refuses it as too long (a 400), and the link stays up for the next request", async () => {
    const connectedAt = scheduler.fleet.snapshot()[0]!.connectedAt;
    const big = await postChat(httpBase(scheduler), key, { model: MODEL_ID, messages: [{ role: "user", content: "a".repeat(5 * 1024 * 1024) }], max_tokens: 1 });
    expect(big.status).toBe(400);
    expect(big.body.error).toMatchObject({ code: "context_length_exceeded", param: "messages" });
    expect(scheduler.fleet.snapshot()[0]!.connectedAt).toBe(connectedAt); // the same link, never dropped
    const next = await postChat(httpBase(scheduler), key, { model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
    expect(next.status).toBe(200);
  });
});

/**
 * Speculative decoding through the fleet: a real scheduler whose operator catalog gives entries a
 * `speculative`, a real placeable agent (no --serve) on CPU, the fabricated tiny model (as a file, and
 * as a draft model served by a hub on loopback). The scheduler's LoadModel carries the entry's value;
 * the agent loads the replica speculating, and it answers as a replica without speculation does.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import { formatHostPort } from "../core/net.js";
import { estimateReplica } from "../scheduler/placement/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { catalogFile, httpBase, inProcessAgent, inProcessScheduler, postChat, tempDir, TINY_MODEL, until } from "./helpers/fleet.js";
import { startHub, type TestHub } from "./helpers/hub.js";

const SHAPE = { context_size: 512, sequences: 1, idle_unload_s: 0 };
const PROMPT = "Once upon a time there was a little girl. Once upon a time there was a little";

describe("speculative decoding per catalog entry, placed by the fleet", () => {
  let hub: TestHub;
  let scheduler: SchedulerHandle;
  let agent: AgentHandle;
  let key: string;
  const modelsDir = tempDir();
  /** A greedy answer to `messages` from `model`. */
  const chat = (model: string, messages: { role: string; content: string }[] = [{ role: "user", content: PROMPT }]) =>
    postChat(httpBase(scheduler), key, { model, messages, max_tokens: 60, temperature: 0 });
  const pool = (model: string) => agent.engine.modelPools.find((p) => p.modelIds.includes(model));

  beforeAll(async () => {
    hub = await startHub();
    hub.put("acme/draft-GGUF", "draft.gguf", { body: readFileSync(TINY_MODEL) });
    const size = (await estimateReplica(TINY_MODEL, { contextSize: SHAPE.context_size, sequences: SHAPE.sequences })).bytes;
    const catalog = catalogFile([
      { id: "fam-lookup", source: TINY_MODEL, speculative: "lookup", ...SHAPE },
      { id: "fam-draft", source: TINY_MODEL, speculative: "draft:hf:acme/draft-GGUF/draft.gguf", ...SHAPE },
      { id: "fam-plain", source: TINY_MODEL, ...SHAPE },
    ]);
    scheduler = await inProcessScheduler({ catalog, hubUrl: hub.url, queueTimeout: "60" });
    // room for the three replicas and fam-draft's draft model (a copy of the model: its size again)
    agent = await inProcessAgent(scheduler, { serve: [], nodeId: "node-spec", memoryBudget: String(Math.floor(size * 4.5)), hubUrl: hub.url, offline: "false", modelsDir });
    await until(() => scheduler.fleet.snapshot().length === 1, 15_000, "the agent to join");
    key = (await scheduler.keys.create({ account: "speculative", tier: "pro" })).token;
  }, 60_000);
  afterAll(async () => {
    await agent?.close();
    await scheduler?.close();
    await hub?.close();
  });

  it("loads each placed replica with its entry's speculative decoding, and answers as without it", async () => {
    const plain = await chat("fam-plain");
    expect(plain.status, JSON.stringify(plain.body)).toBe(200);
    const lookup = await chat("fam-lookup");
    expect(lookup.status, JSON.stringify(lookup.body)).toBe(200);
    const draft = await chat("fam-draft");
    expect(draft.status, JSON.stringify(draft.body)).toBe(200);

    expect(pool("fam-plain")!.speculation).toBeUndefined();
    expect(pool("fam-lookup")!.speculation!.speculation).toEqual({ kind: "lookup" });
    // the draft pulled through the node's hub client into its --models-dir, and loaded from there
    expect(pool("fam-draft")!.speculation!.speculation).toEqual({ kind: "draft", source: expect.stringMatching(/_draft-GGUF_draft\.[0-9a-f]+\.gguf$/) });
    expect(pool("fam-draft")!.speculation!.speculation).toMatchObject({ source: expect.stringContaining(modelsDir) });
    // greedy output is the same with and without speculation
    const answer = plain.body.choices[0].message.content as string;
    expect(lookup.body.choices[0].message.content).toBe(answer);
    expect(draft.body.choices[0].message.content).toBe(answer);

    // a next turn resends the answer: prompt lookup finds what the model generates in it, and predicts
    const turn = [
      { role: "user", content: PROMPT },
      { role: "assistant", content: answer },
      { role: "user", content: PROMPT },
    ];
    const [plainNext, lookupNext] = [await chat("fam-plain", turn), await chat("fam-lookup", turn)];
    expect(lookupNext.status, JSON.stringify(lookupNext.body)).toBe(200);
    expect(lookupNext.body.choices[0].message.content).toBe(plainNext.body.choices[0].message.content);
    const gate = pool("fam-lookup")!.speculation!;
    expect(gate.validated + gate.refuted).toBeGreaterThan(0);

    const metrics = await (await fetch(`http://${formatHostPort(agent.http)}/metrics`)).text();
    expect(metrics).toContain(`kiln_llm_speculative_validated_total{model="fam-lookup",component="agent"} ${gate.validated}`);
    expect(metrics).toContain(`kiln_llm_speculative_refuted_total{model="fam-lookup",component="agent"} ${gate.refuted}`);
    expect(metrics).toContain(`kiln_llm_speculative_on{model="fam-lookup",component="agent"} ${gate.on ? 1 : 0}`);
    expect(metrics).toMatch(/kiln_llm_speculative_on\{model="fam-draft",component="agent"\} [01]/);
    expect(metrics).not.toMatch(/kiln_llm_speculative_\w+\{model="fam-plain"/);
  });
});

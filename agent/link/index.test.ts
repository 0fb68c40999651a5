/**
 * The agent's link against a scheduler played by a bare grpc-js server in this process: what the
 * agent writes depends on what the scheduler's Registered says it reads.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import type { AgentMessage__Output } from "../../proto/index.js";
import { bareScheduler, linkTo } from "../../test/helpers/bare-scheduler.js";
import { LlmEngine } from "../llm/index.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";

/**
 * Serves one agent: answers its Register (saying whether it reads `chunks`), sends it `requests`
 * completions at once and resolves with every message it wrote once each has its done.
 */
async function scheduler(acceptsChunks: boolean | undefined, requests: number): Promise<{ port: number; messages: Promise<AgentMessage__Output[]>; close: () => void }> {
  let resolve!: (m: AgentMessage__Output[]) => void;
  const messages = new Promise<AgentMessage__Output[]>((ok) => {
    resolve = ok;
  });
  const served = await bareScheduler((call) => {
    const seen: AgentMessage__Output[] = [];
    call.on("data", (m: AgentMessage__Output) => {
      seen.push(m);
      if (m.register) {
        // An older scheduler's Registered has no accepts_chunks field at all.
        call.write({ registered: { node_id: m.register.node_id, heartbeat_interval_ms: 60_000, ...(acceptsChunks === undefined ? {} : { accepts_chunks: acceptsChunks }) } });
        for (let i = 0; i < requests; i++) {
          call.write({
            completion: {
              request_id: `r${i}`,
              trace_id: `t${i}`,
              model: "famB-v3.1",
              messages: [{ role: "user", content: `Story ${i}: once upon a time` }],
              max_tokens: 48,
              temperature: 0,
            },
          });
        }
      }
      if (seen.filter((x) => x.done || x.error).length === requests) resolve(seen);
    });
  });
  return { ...served, messages };
}

/** Each request's text, from single chunks and batched chunks alike. */
function texts(messages: AgentMessage__Output[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const piece of messages.flatMap((m) => (m.chunk ? [m.chunk] : m.chunks ? m.chunks.chunks : []))) {
    out.set(piece.request_id, (out.get(piece.request_id) ?? "") + piece.text);
  }
  return out;
}

describe("FleetLink and the scheduler's Registered", () => {
  let engine: LlmEngine;
  beforeAll(async () => {
    engine = await LlmEngine.load({
      models: [{ id: "famB-v3.1", path: TINY_MODEL }],
      sequences: 3,
      contextSize: 512,
      threads: 1,
      gpu: "cpu",
      logger: createLogger("test", "silent"),
    });
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  async function run(acceptsChunks: boolean | undefined): Promise<AgentMessage__Output[]> {
    const s = await scheduler(acceptsChunks, 3);
    const link = linkTo(s.port, {
      engine,
      // Short enough that 48 tokens span several flushes, each carrying the text of all three completions.
      streamIntervalMs: 2,
    });
    link.start();
    try {
      return await s.messages;
    } finally {
      await link.stop();
      s.close();
    }
  }

  it("batches several completions' text into `chunks` for a scheduler that reads them", async () => {
    const messages = await run(true);
    expect(messages.filter((m) => m.done)).toHaveLength(3);
    expect(messages.some((m) => m.chunks && m.chunks.chunks.length > 1)).toBe(true);
  });

  it("sends one `chunk` per piece, and the same text, to a scheduler whose Registered does not say so", async () => {
    const batched = texts(await run(true));
    for (const said of [undefined, false]) {
      const messages = await run(said);
      expect(messages.filter((m) => m.done)).toHaveLength(3);
      expect(messages.some((m) => m.chunks)).toBe(false);
      expect(texts(messages)).toEqual(batched);
    }
  });
});

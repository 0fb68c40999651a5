import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

// The compiled module: it forks itself into the relay and the echo agent, which needs JavaScript.
type RelayFloor = typeof import("./relay-floor.js");
const { evaluationMs, startRelayFloor } = (await import(pathToFileURL(resolve("dist/scripts/lib/relay-floor.js")).href)) as RelayFloor;

const ask = (base: string) =>
  fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true }),
  });

describe("relay floor (bench-chat's benchmark-only stand-in for the fleet)", () => {
  let floor: Awaited<ReturnType<RelayFloor["startRelayFloor"]>>;
  beforeAll(async () => {
    floor = await startRelayFloor();
  });
  afterAll(async () => {
    await floor?.close();
  });

  it("relays a request through the echo agent and back as OpenAI server-sent events, its text the echo's evaluation: none", async () => {
    const res = await ask(floor.base);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await res.text();
    expect(evaluationMs(text)).toBe(0);
    const events = text
      .split("\n\n")
      .filter(Boolean)
      .map((e) => e.replace(/^data: /, ""));
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events
      .slice(0, -1)
      .map((e) => JSON.parse(e) as { model: string; choices: { delta: { content?: string }; finish_reason: string | null }[]; usage?: { completion_tokens: number } });
    expect(chunks[0]!.model).toBe("m");
    expect(chunks[0]!.choices[0]!.delta.content).toBe("0.0000");
    expect(chunks[1]!.choices[0]!.finish_reason).toBe("length");
    expect(chunks[2]!.usage?.completion_tokens).toBe(1);
  });

  it("with an evaluation, the echo answers with the time its reads took, every time", async () => {
    const evaluating = await startRelayFloor({ evaluation: { bytes: 64 << 20, threads: 2 } });
    try {
      for (let i = 0; i < 3; i++) {
        const res = await ask(evaluating.base);
        expect(res.status).toBe(200);
        expect(evaluationMs(await res.text())).toBeGreaterThan(0);
      }
    } finally {
      await evaluating.close();
    }
  });
});

/**
 * The official `openai` npm client pointed at a real `kiln dev` process: a completion, a streamed
 * completion and the model list. With KILN_TEST_DATA, the same against the real stories260K.gguf.
 * On the fabricated model (ChatML), the answers' text is compared with a greedy reference.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDev, type KilnProcess } from "./helpers/fleet.js";
import { GreedyReference, type ReferenceAnswer, type ReferenceMessage } from "./helpers/reference.js";

const STORIES = process.env.KILN_TEST_DATA ? join(process.env.KILN_TEST_DATA, "models", "stories260K.gguf") : undefined;

async function startClient(serve?: string): Promise<{ proc: KilnProcess; client: OpenAI }> {
  const { proc, base, key } = await startDev(serve ? ["--serve", serve] : []);
  return { proc, client: new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0 }) };
}

/** `kiln dev` with no --serve fabricates its model here (byte-identical to the suite's tiny model). */
const DEV_MODEL = resolve(".kiln", "models", "tiny-chat.gguf");

/**
 * `referenceModel`: the served GGUF, when the greedy reference can render its template (ChatML);
 * the answers' text must then equal the reference's. Without one, only their shape is checked.
 */
function clientSuite(name: string, model: string, serve: () => string | undefined, referenceModel?: string): void {
  describe(name, () => {
    let dev: { proc: KilnProcess; client: OpenAI };
    let reference: GreedyReference | undefined;
    beforeAll(async () => {
      dev = await startClient(serve());
      if (referenceModel) reference = await GreedyReference.load(referenceModel);
    });
    afterAll(async () => {
      await dev?.proc.stop();
      await reference?.dispose();
    });

    /** The reference's answer, which must have text (else comparing with it proves nothing); undefined without a reference. */
    async function expected(messages: ReferenceMessage[], maxTokens: number): Promise<ReferenceAnswer | undefined> {
      const answer = await reference?.complete(messages, maxTokens);
      if (answer) expect(answer.text, "the reference's own text").not.toBe("");
      return answer;
    }

    it("a completion", async () => {
      const messages: ReferenceMessage[] = [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Once upon a time" },
      ];
      const want = await expected(messages, 16);
      const c = await dev.client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
      expect(c.id).toMatch(/^chatcmpl-/);
      expect(c.object).toBe("chat.completion");
      expect(c.model).toBe(model);
      expect(c.choices[0]!.message.role).toBe("assistant");
      expect(typeof c.choices[0]!.message.content).toBe("string");
      expect(["stop", "length"]).toContain(c.choices[0]!.finish_reason);
      if (want) {
        expect(c.choices[0]!.message.content).toBe(want.text);
        expect(c.choices[0]!.finish_reason).toBe(want.finishReason);
        expect(c.usage!.completion_tokens).toBe(want.completionTokens);
      }
      expect(c.usage!.total_tokens).toBe(c.usage!.prompt_tokens + c.usage!.completion_tokens);
      expect(c.usage!.completion_tokens).toBeLessThanOrEqual(16);
      expect(c.usage!.prompt_tokens).toBeGreaterThan(0);
    });

    it("a streamed completion", async () => {
      const messages: ReferenceMessage[] = [{ role: "user", content: "Once upon a time" }];
      const want = await expected(messages, 16);
      const stream = await dev.client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } });
      let text = "";
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? "";
        finish = chunk.choices[0]?.finish_reason ?? finish;
        usage = chunk.usage ?? usage;
      }
      expect(["stop", "length"]).toContain(finish);
      expect(usage!.completion_tokens).toBeGreaterThan(0);
      expect(typeof text).toBe("string");
      if (want) {
        expect(text).toBe(want.text);
        expect(finish).toBe(want.finishReason);
        expect(usage!.completion_tokens).toBe(want.completionTokens);
      }
    });

    it("the model list", async () => {
      const page = await dev.client.models.list();
      const ids = page.data.map((m) => m.id);
      expect(ids).toContain(model);
      for (const m of page.data) expect(m).toMatchObject({ object: "model", owned_by: expect.any(String), created: expect.any(Number) });
    });

    it("errors surface as the client's typed errors", async () => {
      await expect(dev.client.chat.completions.create({ model, messages: [{ role: "user", content: "x" }], temperature: 2.5 })).rejects.toMatchObject({
        status: 400,
        code: "invalid_temperature",
        type: "invalid_request_error",
      });
    });
  });
}

clientSuite("openai client → kiln dev (fabricated tiny model)", "famE-code-fast-1", () => undefined, DEV_MODEL);

const realData = STORIES && existsSync(STORIES);
describe.skipIf(!realData)("with KILN_TEST_DATA (stories260K.gguf)", () => {
  clientSuite("openai client → kiln dev (stories260K.gguf)", "famB-v3.1", () => `famB-v3.1=${STORIES}`);
});
if (!realData)
  describe.skip("with KILN_TEST_DATA (skipped: KILN_TEST_DATA is not set or has no models/stories260K.gguf)", () => {
    it("stories260K suite", () => undefined);
  });

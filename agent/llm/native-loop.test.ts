/**
 * The native generation loop of a lone sequence (`generateTokens` in Kiln's build of the addon,
 * `_kilnGenerateNatively` in patches/npm) against node-llama-cpp's batch path, token for token, on
 * the real binding and the fabricated tiny model.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  getLlama,
  LlamaGrammar,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
} from "node-llama-cpp";
import { join } from "node:path";
import { defaultModelDir, TEST_MODELS } from "../../fabricate/index.js";
import { watchBinding } from "../../test/helpers/binding.js";
import { installedAddon } from "../../core/prebuilt.js";
import { generateTurn, renderPrompt, type TurnOptions, type TurnResult } from "./turn.js";

const TINY_MODEL = join(defaultModelDir(), TEST_MODELS.tiny.file);

let llama: Llama;
let model: LlamaModel;
let context: LlamaContext;
let wrapper: ChatWrapper;
/** Calls of the addon's native loop, and of its stop, since the context was made. */
const calls = { generateTokens: 0, stopGeneratingTokens: 0 };

beforeAll(async () => {
  llama = await getLlama({ gpu: false, build: "never", maxThreads: 2 });
  model = await llama.loadModel({ modelPath: TINY_MODEL });
  // room for a sequence to generate long enough (1,500 tokens, ~0.3 s) that another's request arrives while it does
  context = await model.createContext({ sequences: 2, contextSize: 2048, threads: 1 });
  wrapper = resolveChatWrapper(model);
  watchBinding(context, ["generateTokens", "stopGeneratingTokens"], (name) => calls[name as keyof typeof calls]++);
});
afterAll(async () => {
  await context?.dispose();
  await model?.dispose();
  await llama?.dispose();
});

/** Whether `of` lets a lone sequence generate in the native loop (a flag of Kiln's patch). */
function setNative(on: boolean, of = context): void {
  (of as unknown as { _kilnNativeGeneration: boolean })._kilnNativeGeneration = on;
}

const history = (text: string): ChatHistoryItem[] => [
  { type: "system", text: "You tell stories." },
  { type: "user", text },
];

/** A turn on a fresh sequence, with what it leaves in the sequence: its tokens, and the next turn's cached prefix. */
async function turn(sequence: LlamaContextSequence, text: string, options: TurnOptions): Promise<{ result: TurnResult; streamed: string; state: number[]; next: TurnResult }> {
  await sequence.clearHistory();
  let streamed = "";
  const result = await generateTurn(sequence, renderPrompt(model, wrapper, history(text)), {
    ...options,
    onText: (t, l) => {
      streamed += t;
      options.onText?.(t, l);
    },
  });
  const state = [...sequence.contextTokens];
  expect(sequence.nextTokenIndex).toBe(state.length);
  // the conversation's next turn reuses what the sequence holds: as much of it either way
  const next = await generateTurn(sequence, renderPrompt(model, wrapper, [...history(text), { type: "model", response: [result.text] }, { type: "user", text: "More." }]), {
    maxTokens: 4,
    temperature: 0,
  });
  return { result, streamed, state, next };
}

const addon = installedAddon();
describe.skipIf(!addon)("the native generation loop (Kiln's addon)", () => {
  it("generates what the batch path generates, and leaves the sequence as it does: greedy, seeded, a grammar, a stop text, max_tokens, an abort", async () => {
    const sequence = context.getSequence();
    try {
      // the random test model strings byte tokens into invalid UTF-8: banned, for printable text to cut at
      const logitBias: Record<string, number> = {};
      for (const token of model.iterateAllTokens()) if (model.detokenize([token], true).includes("\uFFFD")) logitBias[String(token)] = -100;
      setNative(false);
      const greedy = await turn(sequence, "Once upon a time", { maxTokens: 60, temperature: 0, sampling: { logitBias } });
      // a stop text from the middle of the greedy reply, so that the loop has decoded past it when it is seen
      const reply = greedy.result.text;
      const at = [...reply].findIndex((_, i) => i >= 15 && reply.indexOf(reply.slice(i, i + 3)) === i);
      expect(at, "a stop text that first appears mid-reply").toBeGreaterThan(0);
      const stop = reply.slice(at, at + 3);
      const cases: [string, () => TurnOptions][] = [
        ["greedy", () => ({ maxTokens: 60, temperature: 0 })],
        ["seeded", () => ({ maxTokens: 60, temperature: 0.9, sampling: { seed: 42, topK: 20, topP: 0.9 } })],
        ["grammar", () => ({ maxTokens: 60, temperature: 1, sampling: { seed: 3 }, grammar: new LlamaGrammar(llama, { grammar: 'root ::= "{" [a-z ]{5,40} "}"' }) })],
        ["stop text", () => ({ maxTokens: 60, temperature: 0, sampling: { stop: [stop], logitBias } })],
        ["max_tokens", () => ({ maxTokens: 7, temperature: 0 })],
        [
          "abort",
          () => {
            const ac = new AbortController();
            let pieces = 0;
            return { maxTokens: 60, temperature: 0, sampling: { logitBias }, signal: ac.signal, onText: () => void (++pieces === 12 && ac.abort()) };
          },
        ],
      ];
      for (const [name, options] of cases) {
        setNative(false);
        const before = calls.generateTokens;
        const batch = await turn(sequence, "Once upon a time", options());
        expect(calls.generateTokens, `${name}: the batch path never calls the loop`).toBe(before);
        setNative(true);
        const native = await turn(sequence, "Once upon a time", options());
        expect(calls.generateTokens, `${name}: the loop ran`).toBeGreaterThan(before);
        expect(native.result, name).toEqual(batch.result);
        expect(native.streamed, name).toBe(batch.streamed);
        expect(native.state, `${name}: the tokens the sequence holds`).toEqual(batch.state);
        expect(native.next, `${name}: the next turn`).toEqual(batch.next);
      }
      // the stop text cut the reply where it first appears, well before its end
      expect((await turn(sequence, "Once upon a time", { maxTokens: 60, temperature: 0, sampling: { stop: [stop], logitBias } })).result.text).toBe(reply.slice(0, at));
      expect(reply.length).toBeGreaterThan(at + 3);
    } finally {
      setNative(true);
      sequence.dispose();
    }
  });

  it("gives the context up at once to another sequence's request, which then batches with it", async () => {
    const [a, b] = [context.getSequence(), context.getSequence()];
    try {
      const prompt = (text: string) => renderPrompt(model, wrapper, history(text));
      // each alone, on the batch path
      setNative(false);
      await a.clearHistory();
      const aloneA = await generateTurn(a, prompt("Once upon a time"), { maxTokens: 1500, temperature: 0 });
      await b.clearHistory();
      const aloneB = await generateTurn(b, prompt("The dog"), { maxTokens: 20, temperature: 0 });
      setNative(true);
      await a.clearHistory();
      await b.clearHistory();
      const stops = calls.stopGeneratingTokens;
      let textsOfA = 0;
      let bStartedAt = -1;
      let bFirstTextAt = -1;
      let started: Promise<TurnResult> | undefined;
      const ofA = await generateTurn(a, prompt("Once upon a time"), {
        maxTokens: 1500,
        temperature: 0,
        onText: () => {
          textsOfA++;
          // B arrives while A generates alone in the loop
          if (textsOfA === 10) {
            bStartedAt = textsOfA;
            started = generateTurn(b, prompt("The dog"), {
              maxTokens: 20,
              temperature: 0,
              onText: () => {
                if (bFirstTextAt < 0) bFirstTextAt = textsOfA;
              },
            });
          }
        },
      });
      const ofB = await started!;
      expect(ofA).toEqual(aloneA);
      expect(ofB).toEqual(aloneB);
      expect(calls.stopGeneratingTokens).toBeGreaterThan(stops);
      // B's first text came while A was still generating, not after A's 1,500 tokens
      expect(bFirstTextAt).toBeGreaterThan(bStartedAt);
      expect(bFirstTextAt).toBeLessThan(textsOfA);
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  it("with two threads (the loop's own ggml threadpool) generates what the batch path generates", async () => {
    const two = await model.createContext({ sequences: 1, contextSize: 256, threads: 2 });
    let loops = 0;
    watchBinding(two, ["generateTokens"], () => loops++);
    const sequence = two.getSequence();
    try {
      for (const options of [
        { maxTokens: 80, temperature: 0 },
        { maxTokens: 80, temperature: 0.9, sampling: { seed: 5 } },
      ] as TurnOptions[]) {
        const texts: string[] = [];
        for (const native of [false, true, false]) {
          setNative(native, two);
          await sequence.clearHistory();
          texts.push((await generateTurn(sequence, renderPrompt(model, wrapper, history("Once upon a time")), options)).text);
        }
        expect(texts[1]).toBe(texts[0]);
        expect(texts[2]).toBe(texts[0]); // and the batch path after the loop's threadpool ran
      }
      expect(loops).toBe(2);
    } finally {
      await two.dispose();
    }
  });

  it("a budget that is not a whole number generates its whole part in the loop, then goes on in the batch path (never a loop that decodes nothing)", async () => {
    const sequence = context.getSequence();
    let loops = 0;
    const unwatch = watchBinding(context, ["generateTokens"], () => loops++);
    try {
      setNative(true);
      const prompt = renderPrompt(model, wrapper, history("Once upon a time"));
      const tokens: number[] = [];
      for await (const { token } of sequence.evaluateWithMetadata(prompt.tokens, {}, { temperature: 0, maxTokens: 10.5 })) {
        tokens.push(token);
        if (tokens.length === 15) break;
      }
      expect(tokens).toHaveLength(15); // 10 within the budget, in the loop; the rest in the batch path (the caller stops it)
      expect(loops).toBeLessThanOrEqual(2);
    } finally {
      unwatch();
      sequence.dispose();
    }
  }, 20_000);

  it("runs at most UV_THREADPOOL_SIZE − 2 loops at once (2 by default: each holds a libuv thread for its generation)", async () => {
    expect(process.env.UV_THREADPOOL_SIZE).toBeUndefined();
    // threads for three contexts at once (the shared instance has one, which the three would take in turns)
    const wide = await getLlama({ gpu: false, build: "never", maxThreads: 3 });
    const wideModel = await wide.loadModel({ modelPath: TINY_MODEL });
    // generations long enough (1,500 tokens, ~0.3 s) that the three overlap however the loops start
    const contexts = await Promise.all([0, 1, 2].map(() => wideModel.createContext({ sequences: 1, contextSize: 2048, threads: 1 })));
    let running = 0;
    let most = 0;
    let loops = 0;
    for (const c of contexts)
      watchBinding(c, ["generateTokens"], (_name, _args, result) => {
        loops++;
        most = Math.max(most, ++running);
        void (result as Promise<unknown>).finally(() => running--);
      });
    try {
      const texts = await Promise.all(
        contexts.map((c) => generateTurn(c.getSequence(), renderPrompt(model, wrapper, history("Once upon a time")), { maxTokens: 1500, temperature: 0 })),
      );
      expect(new Set(texts.map((t) => t.text)).size).toBe(1); // the same on whichever path
      expect(loops).toBeGreaterThan(0);
      expect(most).toBe(2);
    } finally {
      await Promise.all(contexts.map((c) => c.dispose()));
      await wideModel.dispose();
      await wide.dispose();
    }
  });
});

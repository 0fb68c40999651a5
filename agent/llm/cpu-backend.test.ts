/** Which CPU backend and addon node-llama-cpp loads, on the real binding. */
import { describe, expect, it } from "vitest";
import { getLlama, LlamaGrammarEvaluationState, LlamaLogLevel, type Token } from "node-llama-cpp";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { ensureTestModel } from "../../fabricate/index.js";
import { watchBinding } from "../../test/helpers/binding.js";
import { CPU_BACKEND_FILE, installedCpuBackend, physicalCores, x86Features } from "../../core/cpu.js";
import { installedAddon } from "../../core/prebuilt.js";

describe("CPU backend", () => {
  it("names the ggml SIMD options a CPU's flags allow (AVX-512 needs all five base flags)", () => {
    expect(x86Features(new Set(["sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"]))).toEqual(["GGML_SSE42", "GGML_AVX", "GGML_F16C", "GGML_FMA", "GGML_AVX2", "GGML_BMI2"]);
    expect(x86Features(new Set(["avx2", "avx512f", "avx512vbmi"]))).toEqual(["GGML_AVX2", "GGML_AVX512_VBMI"]);
    expect(x86Features(new Set(["avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw", "avx512_vnni"]))).toEqual(["GGML_AVX512", "GGML_AVX512_VNNI"]);
  });

  it("counts physical cores, not hyperthread siblings", () => {
    const cpu = (n: number, core: number, socket = 0) => `processor\t: ${n}\nphysical id\t: ${socket}\ncore id\t\t: ${core}\n`;
    expect(physicalCores([cpu(0, 0), cpu(1, 1), cpu(2, 0), cpu(3, 1)].join("\n"))).toBe(2);
    expect(physicalCores([cpu(0, 0), cpu(1, 0, 1)].join("\n"))).toBe(2);
    expect(physicalCores("processor\t: 0\n")).toBeGreaterThanOrEqual(1); // no topology: the logical count
    expect(physicalCores()).toBeGreaterThanOrEqual(1);
  });

  const installed = installedCpuBackend();
  it.skipIf(!installed)(
    `node-llama-cpp loads Kiln's shared-threadpool backend over its own variants${installed ? "" : " (skipped: not installed here; npm install builds it on Linux x86-64 with cmake and git)"}`,
    async () => {
      const loaded: string[] = [];
      const llama = await getLlama({
        gpu: false,
        build: "never",
        logLevel: LlamaLogLevel.debug,
        logger: (_level, message) => {
          if (message.includes("loaded CPU backend")) loaded.push(message);
        },
      });
      await llama.dispose();
      expect(loaded.join("\n")).toContain(CPU_BACKEND_FILE);
    },
  );

  const addon = installedAddon();
  it.skipIf(!addon)(
    `the decode worker samples the next token (Kiln's build of the addon), as the separate sampling call would${addon ? "" : " (skipped: not installed here; npm install builds it on Linux with cmake and Node's headers)"}`,
    async () => {
      const llama = await getLlama({ gpu: false, build: "never" });
      try {
        const model = await llama.loadModel({ modelPath: TINY_MODEL });
        const context = await model.createContext({ contextSize: 256, sequences: 1, threads: 1 });
        const calls = { sampleToken: 0, presampled: 0 };
        watchBinding(context, ["sampleToken", "decodeBatch"], (name, _args, result) => {
          if (name === "sampleToken") calls.sampleToken++;
          else
            void (result as Promise<unknown>).then(
              (tokens) => {
                if (Array.isArray(tokens)) calls.presampled += tokens.length;
              },
              () => undefined,
            );
        });
        const sequence = context.getSequence();
        type Options = { temperature: number; seed?: number; repeatPenalty?: { penalty: number; punishTokens: () => Token[] } };
        const generate = async (makeOptions: (tokens: Token[]) => Options, viaSampleToken: boolean): Promise<Token[]> => {
          await sequence.clearHistory();
          const tokens: Token[] = [];
          const options = makeOptions(tokens);
          // asking for the confidence takes node-llama-cpp's own path: one sampleToken call per token
          const iterator = viaSampleToken
            ? sequence.evaluateWithMetadata(model.tokenize("once upon"), { confidence: true }, { ...options, yieldEogToken: true })
            : sequence.evaluate(model.tokenize("once upon"), { ...options, yieldEogToken: true });
          for await (const item of iterator) {
            tokens.push(typeof item === "number" ? item : item.token);
            if (tokens.length === 40) break;
          }
          return tokens;
        };
        const cases: ((tokens: Token[]) => Options)[] = [
          () => ({ temperature: 0 }), // greedy alone: the worker reads the logits' largest, copying no candidates
          () => ({ temperature: 0.8, seed: 42 }),
          // a function node-llama-cpp calls for every token: the configuration is applied again each time
          (tokens) => ({ temperature: 0, repeatPenalty: { penalty: 1.5, punishTokens: () => tokens.slice(-8) } }),
        ];
        for (const makeOptions of cases) {
          const before = { ...calls };
          const presampled = await generate(makeOptions, false);
          expect(calls.sampleToken - before.sampleToken).toBe(0);
          expect(calls.presampled - before.presampled).toBe(40);
          const sampled = await generate(makeOptions, true);
          expect(calls.sampleToken - before.sampleToken).toBe(40);
          expect(presampled).toEqual(sampled);
        }
        await context.dispose();
      } finally {
        await llama.dispose();
      }
    },
  );

  it.skipIf(!addon)(
    `the decode worker samples a batch's tokens on several threads at once, each sequence's as it samples alone${addon ? "" : " (skipped: not installed here; npm install builds it on Linux with cmake and Node's headers)"}`,
    async () => {
      // Llama 3's vocabulary size: 4 sequences' candidates make work for the context's 2 threads
      const llama = await getLlama({ gpu: false, build: "never" });
      try {
        const model = await llama.loadModel({ modelPath: await ensureTestModel("wideVocab") });
        const context = await model.createContext({ contextSize: 512, sequences: 4, threads: 2 });
        const sampledOn: number[] = [];
        watchBinding(context, ["decodeBatch"], (_name, _args, result) => {
          void (result as Promise<unknown>).then(
            (tokens) => {
              if (Array.isArray(tokens)) sampledOn.push((tokens as unknown as { samplingThreads: number }).samplingThreads);
            },
            () => undefined,
          );
        });
        const sequences = Array.from({ length: 4 }, () => context.getSequence());
        type Options = {
          temperature: number;
          seed?: number;
          repeatPenalty?: { penalty: number; punishTokens: () => Token[] };
          grammarEvaluationState?: LlamaGrammarEvaluationState;
        };
        const grammar = await llama.createGrammarForJsonSchema({ type: "object", properties: { a: { type: "string" } } });
        // the 4 sequences at once, each with its own prompt and options; tokens per sequence
        const generate = async (makeOptions: (s: number, tokens: Token[]) => Options, samplingThreads: number): Promise<Token[][]> => {
          Object.assign(context, { _kilnSamplingThreads: samplingThreads });
          return Promise.all(
            sequences.map(async (sequence, s) => {
              await sequence.clearHistory();
              const tokens: Token[] = [];
              for await (const token of sequence.evaluate(model.tokenize(`once upon a time ${s}`), { ...makeOptions(s, tokens), yieldEogToken: true })) {
                tokens.push(token);
                if (tokens.length === 24) break;
              }
              return tokens;
            }),
          );
        };
        const cases: ((s: number, tokens: Token[]) => Options)[] = [
          () => ({ temperature: 0 }),
          (s) => ({ temperature: 0.8, seed: 42 + s }),
          (_s, tokens) => ({ temperature: 0, repeatPenalty: { penalty: 1.5, punishTokens: () => tokens.slice(-8) } }),
          // each sequence's own grammar state
          () => ({ temperature: 0, grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar }) }),
        ];
        for (const makeOptions of cases) {
          sampledOn.length = 0;
          const together = await generate(makeOptions, 0);
          expect(sampledOn.filter((threads) => threads === 2).length).toBeGreaterThan(10);
          sampledOn.length = 0;
          const oneByOne = await generate(makeOptions, 1);
          expect(new Set(sampledOn)).toEqual(new Set([1]));
          expect(together).toEqual(oneByOne);
          expect(together.every((tokens) => tokens.length === 24)).toBe(true);
        }
        // one grammar state for every sequence: their samplers would change it at once, so they sample one by one
        const shared = new LlamaGrammarEvaluationState({ model, grammar });
        sampledOn.length = 0;
        await generate(() => ({ temperature: 0, grammarEvaluationState: shared }), 0);
        expect(sampledOn.length).toBeGreaterThan(10);
        expect(new Set(sampledOn)).toEqual(new Set([1]));
        await context.dispose();
      } finally {
        await llama.dispose();
      }
    },
  );
});

/**
 * `npm run bench:chat -- --speculative [--model PATH | --bench-model] [--draft-never PATH] [--tokens N] [--rounds N]`:
 * one stream's generation speed (tokens after the first ÷ the time from the first to the last) in
 * Kiln's engine, in one run, the sides taking turns round by round:
 *
 * - plain: no speculation;
 * - self draft: the model as its own draft (`draft:` the same file: acceptance near 1);
 * - never agrees: a draft model that disagrees (`--draft-never`, default the fabricated tiny model,
 *   random weights with the same byte vocabulary as the fabricated models), the gate turning it off;
 * - lookup: prompt lookup, on a prompt that repeats itself.
 *
 * Greedy (temperature 0), so every side generates the same tokens; the output is checked to be the
 * same. Issue 42's targets: self draft ≥ 1.5× plain, never agrees ≥ 0.95× plain.
 */
import { createLogger } from "../../core/log.js";
import { LlmEngine } from "../../agent/llm/index.js";
import type { Speculation } from "../../core/speculation.js";
import { median } from "./cli.js";

export interface SpeculativeBenchOptions {
  modelPath: string;
  /** A draft that disagrees with the model (same vocabulary). */
  neverPath: string;
  tokens: number;
  rounds: number;
  threads: number;
}

const PROMPT =
  "Once upon a time there was a little girl named Lily. She loved to play in the park with her friends. One day, Lily went to the park with her mom. Once upon a time there was a little girl named";

export async function benchSpeculative(o: SpeculativeBenchOptions): Promise<void> {
  const sides: { name: string; speculative?: Speculation }[] = [
    { name: "plain" },
    { name: "self draft", speculative: { kind: "draft", source: o.modelPath } },
    { name: "never agrees", speculative: { kind: "draft", source: o.neverPath } },
    { name: "lookup", speculative: { kind: "lookup" } },
  ];
  const engines: LlmEngine[] = [];
  for (const side of sides) {
    engines.push(
      await LlmEngine.load({
        models: [{ id: "m", path: o.modelPath, ...(side.speculative ? { speculative: side.speculative } : {}) }],
        sequences: 1,
        contextSize: 1024,
        threads: o.threads,
        gpu: "cpu",
        logger: createLogger("bench", "warn"),
      }),
    );
  }
  const gates = engines.map((e) => e.modelPools[0]?.speculation);
  const speeds: number[][] = sides.map(() => []);
  const texts: string[] = [];
  try {
    for (let round = 0; round < o.rounds + 1; round++) {
      for (let k = 0; k < sides.length; k++) {
        const i = (k + round) % sides.length; // the order rotates
        let first = 0;
        let pieces = 0;
        const result = await engines[i]!.generate(
          "m",
          { prompt: PROMPT },
          {
            temperature: 0,
            maxTokens: o.tokens,
            onText: () => {
              if (pieces++ === 0) first = performance.now();
            },
          },
        );
        const seconds = (performance.now() - first) / 1000;
        texts[i] ??= result.text;
        if (result.text !== texts[0] && texts[0] !== undefined) throw new Error(`${sides[i]!.name}'s output differs from plain's`);
        if (round > 0) speeds[i]!.push((result.completionTokens - 1) / seconds); // round 0 warms up
      }
    }
  } finally {
    for (const engine of engines) await engine.dispose().catch(() => undefined);
  }
  const plain = median(speeds[0]!);
  console.log(`one stream, ${o.tokens} tokens, ${o.rounds} rounds (median), greedy; outputs identical on every side\n`);
  for (const [i, side] of sides.entries()) {
    const gate = gates[i];
    const s = median(speeds[i]!);
    const acceptance = gate
      ? `, acceptance ${(gate.acceptance * 100).toFixed(0)} % (${gate.validated} validated, ${gate.refuted} refuted, ${gate.emptyRounds} empty draft rounds), turned off ${gate.turnedOff}×`
      : "";
    console.log(`${side.name.padEnd(13)} ${s.toFixed(1).padStart(8)} tokens/s  ${(s / plain).toFixed(3)}× plain${acceptance}`);
  }
  console.log(`\ntargets (issue 42): self draft ≥ 1.5× plain; never agrees ≥ 0.95× plain`);
}

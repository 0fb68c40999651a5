/** The lean turn generator against node-llama-cpp's own LlamaChat, on the real binding and the fabricated tiny model. */
import { once } from "node:events";
import { createServer, connect, type AddressInfo, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getLlama, LlamaChat, LlamaGrammar, resolveChatWrapper, type ChatHistoryItem, type ChatWrapper, type Llama, type LlamaContext, type LlamaModel } from "node-llama-cpp";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { watchBinding } from "../../test/helpers/binding.js";
import { generateTurn, renderPrompt, type TokenLogprob } from "./turn.js";

let llama: Llama;
let model: LlamaModel;
let context: LlamaContext;
let wrapper: ChatWrapper;

beforeAll(async () => {
  llama = await getLlama({ gpu: false, build: "never", maxThreads: 1 });
  model = await llama.loadModel({ modelPath: TINY_MODEL });
  context = await model.createContext({ sequences: 2, contextSize: 512, threads: 1 });
  wrapper = resolveChatWrapper(model);
});
afterAll(async () => {
  await context?.dispose();
  await model?.dispose();
  await llama?.dispose();
});

const history = (text: string): ChatHistoryItem[] => [
  { type: "system", text: "You tell stories." },
  { type: "user", text },
];

describe("generateTurn", () => {
  it("renders the GGUF's ChatML template and reads its stop triggers", () => {
    const prompt = renderPrompt(model, wrapper, history("hi"));
    expect(model.detokenize(prompt.tokens, true)).toBe("<s><|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    const end = model.tokenize("<|im_end|>", true);
    expect(end).toHaveLength(1);
    expect(prompt.stops.isStopToken(end[0]!)).toBe(true);
    // the literal text of the trigger stops too, and a partial one is held back
    expect(prompt.stops.scan("once <|im_end|> more")).toEqual({ stopAt: 5, safe: 5, matched: "<|im_end|>" });
    // a request's stop text starting where a trigger of the template's does is the one named
    expect(prompt.stops.with(["<|im"]).scan("once <|im_end|> more")).toEqual({ stopAt: 5, safe: 5, matched: "<|im" });
    expect(prompt.stops.scan("once <|im_")).toEqual({ stopAt: -1, safe: 5 });
    expect(prompt.stops.scan("once upon")).toEqual({ stopAt: -1, safe: 9 });
  });

  it("greedy output is LlamaChat's (no repeat penalty), and streaming it decodes like the whole", async () => {
    const sequence = context.getSequence();
    try {
      const chat = new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false });
      for (const text of ["Once upon a time", "héllo wörld ✓"]) {
        const theirs = await chat.generateResponse(history(text), { maxTokens: 40, temperature: 0, repeatPenalty: false });
        await sequence.clearHistory();
        const prompt = renderPrompt(model, wrapper, history(text));
        let streamed = "";
        const ours = await generateTurn(sequence, prompt, {
          maxTokens: 40,
          temperature: 0,
          onText: (t) => {
            streamed += t;
          },
        });
        // The random model emits stray bytes; LlamaChat drops an undecodable tail, Kiln sends it as U+FFFD.
        expect(ours.text.startsWith(theirs.response)).toBe(true);
        expect(streamed).toBe(ours.text);
        await sequence.clearHistory();
        const tokens = [];
        for await (const token of sequence.evaluate(prompt.tokens, { temperature: 0 })) if (tokens.push(token) >= ours.completionTokens) break;
        expect(ours.text).toBe(model.detokenize(tokens));
        await sequence.clearHistory();
      }
    } finally {
      sequence.dispose();
    }
  });

  it("keeps the KV cache of a shared prefix and gives the same result as a fresh sequence", async () => {
    const [warm, fresh] = [context.getSequence(), context.getSequence()];
    try {
      const first = history("The cat");
      const a = await generateTurn(warm, renderPrompt(model, wrapper, first), { maxTokens: 8, temperature: 0 });
      const second: ChatHistoryItem[] = [...first, { type: "model", response: [a.text] }, { type: "user", text: "And then?" }];
      const prompt = renderPrompt(model, wrapper, second);
      const before = warm.tokenMeter.usedInputTokens;
      const b = await generateTurn(warm, prompt, { maxTokens: 8, temperature: 0 });
      const evaluated = warm.tokenMeter.usedInputTokens - before;
      expect(evaluated).toBeLessThan(prompt.tokens.length / 2);
      const c = await generateTurn(fresh, prompt, { maxTokens: 8, temperature: 0 });
      expect(b.text).toBe(c.text);
      // the very same prompt again still evaluates its last token (for the logits) and repeats itself
      const d = await generateTurn(fresh, prompt, { maxTokens: 8, temperature: 0 });
      expect(d.text).toBe(c.text);
    } finally {
      warm.dispose();
      fresh.dispose();
    }
  });

  it("continues a trailing assistant message (prefill) and counts max_tokens exactly", async () => {
    const sequence = context.getSequence();
    try {
      const prompt = renderPrompt(model, wrapper, [...history("Tell me"), { type: "model", response: ["Once upon"] }]);
      expect(model.detokenize(prompt.tokens, true).endsWith("<|im_start|>assistant\nOnce upon")).toBe(true);
      const r = await generateTurn(sequence, prompt, { maxTokens: 5, temperature: 0 });
      expect(r.completionTokens).toBeLessThanOrEqual(5);
      if (r.stopReason === "length") expect(r.completionTokens).toBe(5);
    } finally {
      sequence.dispose();
    }
  });

  it("names the request's stop text it stopped at (the earliest in the text), never the template's own", async () => {
    const sequence = context.getSequence();
    try {
      const prompt = renderPrompt(model, wrapper, history("Once upon a time"));
      const full = (await generateTurn(sequence, prompt, { maxTokens: 24, temperature: 0 })).text;
      expect(full.length).toBeGreaterThan(6);
      const [early, late] = [full.slice(2, 4), full.slice(-3)];
      await sequence.clearHistory();
      const stopped = await generateTurn(sequence, prompt, { maxTokens: 24, temperature: 0, sampling: { stop: [late, early] } });
      expect(stopped).toMatchObject({ text: full.slice(0, full.indexOf(early)), stopReason: "eog", stopText: early });
      await sequence.clearHistory();
      expect((await generateTurn(sequence, prompt, { maxTokens: 24, temperature: 0 })).stopText).toBeUndefined();
    } finally {
      sequence.dispose();
    }
  });

  it("holds the output to a grammar: its stop triggers end the turn, and a trailing whitespace it trims is never released", async () => {
    const sequence = context.getSequence();
    try {
      const run = async (grammar: LlamaGrammar) => {
        let streamed = "";
        const r = await generateTurn(sequence, renderPrompt(model, wrapper, history("go")), {
          maxTokens: 40,
          temperature: 1,
          sampling: { seed: 7 },
          grammar,
          onText: (t) => {
            streamed += t;
          },
        });
        expect(streamed).toBe(r.text);
        await sequence.clearHistory();
        return r;
      };
      // the grammar forces the text, three spaces, then the model may only end
      expect(await run(new LlamaGrammar(llama, { grammar: 'root ::= "{}" [ ]{3}', trimWhitespaceSuffix: true }))).toMatchObject({ text: "{}", stopReason: "eog" });
      expect(await run(new LlamaGrammar(llama, { grammar: 'root ::= "{}" [ ]{3}' }))).toMatchObject({ text: "{}   ", stopReason: "eog" });
      // a stop trigger of the grammar's ends the turn there, itself not part of the text
      expect(await run(new LlamaGrammar(llama, { grammar: 'root ::= "ab" "\\n\\n" [a-z]*', stopGenerationTriggers: ["\n\n"] }))).toMatchObject({ text: "ab", stopReason: "eog" });
    } finally {
      sequence.dispose();
    }
  });

  it("reports each token's log probability and alternatives with the text it completes; a stop text's tokens are not reported", async () => {
    const sequence = context.getSequence();
    try {
      // the random test model strings byte tokens into invalid UTF-8, whose U+FFFD count depends on how they are grouped: banned here
      const logitBias: Record<string, number> = {};
      for (const token of model.iterateAllTokens()) if (model.detokenize([token], true).includes("\uFFFD")) logitBias[String(token)] = -100;
      const pieces: { text: string; logprobs: TokenLogprob[] }[] = [];
      const r = await generateTurn(sequence, renderPrompt(model, wrapper, history("Once upon a time")), {
        maxTokens: 12,
        temperature: 0,
        logprobs: 3,
        sampling: { logitBias },
        onText: (text, logprobs) => pieces.push({ text, logprobs: logprobs! }),
      });
      const entries = pieces.flatMap((p) => p.logprobs);
      expect(r.stopReason).toBe("length");
      expect(entries).toHaveLength(12);
      expect(entries.map((e) => e.token).join("")).toBe(r.text);
      for (const p of pieces) expect(p.logprobs.map((e) => e.token).join("")).toBe(p.text); // each piece with its own tokens
      entries.forEach((e, i) =>
        expect(e.offset).toBe(
          entries
            .slice(0, i)
            .map((x) => x.token)
            .join("").length,
        ),
      ); // where each starts in the reply
      for (const e of entries) {
        expect(e.top).toHaveLength(3);
        expect(e.top[0]).toEqual({ token: e.token, logprob: e.logprob }); // greedy: the most likely token
        expect(e.top[0]!.logprob).toBeGreaterThanOrEqual(e.top[1]!.logprob);
        expect(e.logprob).toBeLessThanOrEqual(0);
        expect(e.top.reduce((sum, t) => sum + Math.exp(t.logprob), 0)).toBeLessThanOrEqual(1 + 1e-6);
      }
      await sequence.clearHistory();
      // cut by a stop text at a token boundary: the tokens after it are not reported
      const cuts = entries.map(
        (_, k) =>
          entries
            .slice(0, k)
            .map((e) => e.token)
            .join("").length,
      );
      const cutAt = cuts.find((at) => at > 0 && /^[ -~]{2}$/.test(r.text.slice(at, at + 2)) && r.text.indexOf(r.text.slice(at, at + 2)) === at);
      expect(cutAt, "a printable stop text that first appears at a token boundary").toBeDefined();
      const stop = r.text.slice(cutAt!, cutAt! + 2);
      const stopped: TokenLogprob[] = [];
      const s = await generateTurn(sequence, renderPrompt(model, wrapper, history("Once upon a time")), {
        maxTokens: 12,
        temperature: 0,
        logprobs: 0,
        sampling: { stop: [stop], logitBias },
        onText: (_t, l) => stopped.push(...l!),
      });
      expect(s.text).toBe(r.text.slice(0, r.text.indexOf(stop)));
      expect(stopped.map((e) => e.token).join("")).toBe(s.text);
      expect(stopped.every((e) => e.top.length === 0)).toBe(true);
    } finally {
      sequence.dispose();
    }
  });

  it("gives the tokens that complete one character together the character's offset, and their raw bytes", async () => {
    const sequence = context.getSequence();
    try {
      const entries: TokenLogprob[] = [];
      // a grammar that allows only "éé!": the test model writes "é" in byte tokens
      const r = await generateTurn(sequence, renderPrompt(model, wrapper, history("go")), {
        maxTokens: 10,
        temperature: 1,
        sampling: { seed: 1 },
        logprobs: 0,
        grammar: new LlamaGrammar(llama, { grammar: 'root ::= "éé!"' }),
        onText: (_t, l) => entries.push(...l!),
      });
      expect(r.text).toBe("éé!");
      const at = (offset: number) => entries.filter((e) => e.offset === offset).map((e) => e.token);
      expect(at(0).length).toBeGreaterThan(1); // the first "é": its byte tokens, all at its offset
      expect(at(1)).toEqual(at(0)); // the second, the same bytes
      expect(at(2)).toEqual(["!"]);
      expect(entries).toHaveLength(at(0).length * 2 + 1);
      // their raw bytes, read from the vocabulary (their text is U+FFFD), make up the reply's UTF-8
      expect(Buffer.from(entries.flatMap((e) => e.bytes ?? [...Buffer.from(e.token)])).toString()).toBe("éé!");
    } finally {
      sequence.dispose();
    }
  });

  it("gets only the 64 most likely tokens' probabilities from the addon, most likely first (not the whole vocabulary, built on the main thread)", async () => {
    const sequence = context.getSequence();
    try {
      expect(model.fileInfo.metadata.tokenizer.ggml.tokens.length).toBeGreaterThan(64);
      for await (const out of sequence.evaluateWithMetadata(model.tokenize("Once upon a time"), { probabilities: true, confidence: true }, { temperature: 0 })) {
        const values = [...out.probabilities.values()];
        expect(values).toHaveLength(64);
        expect(values).toEqual([...values].sort((a, b) => b - a));
        expect(out.probabilities.keys().next().value).toBe(out.token); // greedy: the most likely
        expect(values[0]).toBeCloseTo(out.confidence, 6);
        break;
      }
    } finally {
      sequence.dispose();
    }
  });

  it("stops at once on an aborted signal", async () => {
    const sequence = context.getSequence();
    try {
      const ac = new AbortController();
      const r = await generateTurn(sequence, renderPrompt(model, wrapper, history("go")), { maxTokens: 400, temperature: 1, signal: ac.signal, onText: () => ac.abort() });
      expect(r.stopReason).toBe("abort");
      expect(r.completionTokens).toBeLessThan(10);
    } finally {
      sequence.dispose();
    }
  });

  it("lets the first text's I/O through before the next token is decoded", async () => {
    // A loopback connection in this process: a byte written on one end is read on the other in the event loop's next poll phase.
    const server = createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const accepted = once(server, "connection") as Promise<[Socket]>;
    const writer = connect((server.address() as AddressInfo).port, "127.0.0.1");
    await once(writer, "connect");
    const [reader] = await accepted;
    // A context of its own with one sequence: node-llama-cpp's batch loop (patches/npm) waits up to
    // two turns for the other sequences of its last batches, which would let the I/O through anyway.
    const own = await model.createContext({ sequences: 1, contextSize: 256, threads: 1 });
    let decodes = 0;
    // a lone sequence's later tokens come from the addon's native loop (patches/npm): its start is the next decode
    watchBinding(own, ["decodeBatch", "generateTokens"], () => {
      decodes++;
    });
    const sequence = own.getSequence();
    try {
      let atFirstText = -1;
      const read = new Promise<number>((resolve) => reader.once("data", () => resolve(decodes)));
      const r = await generateTurn(sequence, renderPrompt(model, wrapper, history("go")), {
        maxTokens: 20,
        temperature: 0,
        onText: () => {
          if (atFirstText >= 0) return;
          atFirstText = decodes;
          writer.write("x");
        },
      });
      expect(r.completionTokens).toBe(20);
      expect(atFirstText).toBeGreaterThan(0);
      expect(await read).toBe(atFirstText); // read before another decode began
    } finally {
      await own.dispose();
      writer.destroy();
      reader.destroy();
      server.close();
    }
  });
});

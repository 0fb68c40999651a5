/** Raw token bytes from the vocabulary: byte-level BPE (Llama 3's real tokenizer) and SentencePiece byte tokens (the test model's). */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getLlama, type Llama, type LlamaModel, type Token } from "node-llama-cpp";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { vocabGguf } from "../../scripts/build-llama.js";
import { rawTokenBytes } from "./token-bytes.js";

let llama: Llama;
let bpe: LlamaModel;
let spm: LlamaModel;

beforeAll(async () => {
  llama = await getLlama({ gpu: false, build: "never" });
  bpe = await llama.loadModel({ modelPath: vocabGguf("llama-bpe"), vocabOnly: true });
  spm = await llama.loadModel({ modelPath: TINY_MODEL });
});
afterAll(async () => {
  await bpe?.dispose();
  await spm?.dispose();
  await llama?.dispose();
});

/** Each token's bytes as the logprobs give them: raw where its own text is U+FFFD, else its text's UTF-8. */
function bytesOf(model: LlamaModel, tokens: Token[]): number[] {
  return tokens.flatMap((t) => {
    const text = model.detokenize([t], false);
    return rawTokenBytes(model, t, text) ?? [...Buffer.from(text)];
  });
}

describe("rawTokenBytes", () => {
  it.each([
    ["byte-level BPE (Llama 3)", () => bpe],
    ["SentencePiece byte tokens", () => spm],
  ])("%s: the tokens of text with characters split across tokens give back its UTF-8", (_name, model) => {
    const text = "é 🦊 𝔘 ∑ 頁";
    const tokens = model().tokenize(text);
    expect(tokens.some((t) => model().detokenize([t], false).includes("\uFFFD"))).toBe(true); // some character is split
    expect(Buffer.from(bytesOf(model(), tokens)).toString()).toBe(text);
  });

  it("leaves a token whose text is whole alone", () => {
    const [token] = bpe.tokenize("hello");
    expect(rawTokenBytes(bpe, token!, "hello")).toBeUndefined();
  });
});

/**
 * A token's raw bytes, for OpenAI's `logprobs[].bytes`. A token that is a piece of a multi-byte
 * character decodes to U+FFFD on its own; its bytes come from the vocabulary instead: SentencePiece's
 * byte tokens (`<0xE4>`) and byte-level BPE (GPT-2's map of the 256 bytes onto printable characters,
 * as Llama 3, Qwen and most BPE vocabularies store their tokens).
 */
import type { LlamaModel, Token } from "node-llama-cpp";

const SPM_BYTE = /^<0x([0-9A-Fa-f]{2})>$/;

/** GPT-2's byte → character map, inverted: character code → byte. */
const BYTE_OF_CHAR: ReadonlyMap<number, number> = (() => {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const map = new Map<number, number>();
  let next = 256;
  for (let b = 0; b < 256; b++) map.set(printable(b) ? b : next++, b);
  return map;
})();

/** The token's bytes when its text is not them (it holds U+FFFD), read from the vocabulary; else undefined. */
export function rawTokenBytes(model: LlamaModel, token: Token, text: string): number[] | undefined {
  if (!text.includes("\uFFFD")) return undefined;
  const tokenizer = model.fileInfo.metadata?.tokenizer?.ggml as { model?: string; tokens?: readonly string[] } | undefined;
  const piece = tokenizer?.tokens?.[token];
  if (piece === undefined) return undefined;
  const spm = SPM_BYTE.exec(piece);
  if (spm) return [parseInt(spm[1]!, 16)];
  if (tokenizer?.model === "gpt2") {
    const bytes: number[] = [];
    for (const ch of piece) {
      const b = BYTE_OF_CHAR.get(ch.codePointAt(0)!);
      if (b === undefined) return undefined;
      bytes.push(b);
    }
    return bytes;
  }
  return undefined;
}

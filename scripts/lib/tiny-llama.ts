/**
 * Fabricates llama-architecture GGUF models with seeded random weights, a byte-level
 * SentencePiece vocabulary and a ChatML chat template. They load and run in the real
 * llama.cpp engine; what they say is noise, but every code path (template, tokenizer,
 * sampling, batching, usage counting) is the real one.
 */
import { GgufType, writeGguf, type MetadataValue } from "./gguf-writer.js";
import { normalSource, type TensorSpec, type TensorType } from "./tensors.js";

export interface TinyLlamaOptions {
  /** Embedding width. Default 64. */
  embedding?: number;
  /** Transformer blocks. Default 2. */
  layers?: number;
  /** Attention heads (and KV heads). Default 4. */
  heads?: number;
  /** Feed-forward width. Default 4 × embedding. */
  feedForward?: number;
  /** Trained context length written to the metadata. Default 2048. */
  contextLength?: number;
  /** Weight type. Default "f32". */
  type?: TensorType;
  /** PRNG seed: the same options give a byte-identical file. Default 1. */
  seed?: number;
  /** `general.name`. Default "kiln-tiny-llama". */
  name?: string;
}

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** Token types of llama.cpp's vocabulary. */
const TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6;

/**
 * The vocabulary: <unk>, <s>, </s>, the 256 byte tokens, "▁" (SentencePiece's escaped space, so that
 * spaces detokenize back to spaces), then ChatML's two control tokens.
 */
export function byteVocabulary(): { tokens: string[]; types: number[]; scores: number[]; imEnd: number } {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(TOKEN_BYTE);
  }
  tokens.push("\u2581", "<|im_start|>", "<|im_end|>");
  types.push(TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_CONTROL);
  return { tokens, types, scores: tokens.map(() => 0), imEnd: tokens.length - 1 };
}

/** Parameter count of a model with these options (for naming and reporting). */
export function parameterCount(o: Required<Pick<TinyLlamaOptions, "embedding" | "layers" | "feedForward">>, vocab: number): number {
  const perLayer = 4 * o.embedding * o.embedding + 3 * o.embedding * o.feedForward + 2 * o.embedding;
  return 2 * vocab * o.embedding + o.layers * perLayer + o.embedding;
}

export async function writeTinyLlama(path: string, options: TinyLlamaOptions = {}): Promise<{ parameters: number }> {
  const embedding = options.embedding ?? 64;
  const layers = options.layers ?? 2;
  const heads = options.heads ?? 4;
  const feedForward = options.feedForward ?? embedding * 4;
  const type = options.type ?? "f32";
  const normal = normalSource(options.seed ?? 1);
  const vocab = byteVocabulary();
  const nVocab = vocab.tokens.length;

  const meta: Record<string, MetadataValue> = {
    "general.architecture": { type: GgufType.STRING, value: "llama" },
    "general.name": { type: GgufType.STRING, value: options.name ?? "kiln-tiny-llama" },
    "general.alignment": { type: GgufType.UINT32, value: 32 },
    "llama.context_length": { type: GgufType.UINT32, value: options.contextLength ?? 2048 },
    "llama.embedding_length": { type: GgufType.UINT32, value: embedding },
    "llama.block_count": { type: GgufType.UINT32, value: layers },
    "llama.feed_forward_length": { type: GgufType.UINT32, value: feedForward },
    "llama.attention.head_count": { type: GgufType.UINT32, value: heads },
    "llama.attention.head_count_kv": { type: GgufType.UINT32, value: heads },
    "llama.attention.layer_norm_rms_epsilon": { type: GgufType.FLOAT32, value: 1e-5 },
    "llama.rope.dimension_count": { type: GgufType.UINT32, value: embedding / heads },
    "llama.vocab_size": { type: GgufType.UINT32, value: nVocab },
    "tokenizer.ggml.model": { type: GgufType.STRING, value: "llama" },
    "tokenizer.ggml.tokens": { type: GgufType.ARRAY, itemType: GgufType.STRING, value: vocab.tokens },
    "tokenizer.ggml.scores": { type: GgufType.ARRAY, itemType: GgufType.FLOAT32, value: vocab.scores },
    "tokenizer.ggml.token_type": { type: GgufType.ARRAY, itemType: GgufType.INT32, value: vocab.types },
    "tokenizer.ggml.unknown_token_id": { type: GgufType.UINT32, value: 0 },
    "tokenizer.ggml.bos_token_id": { type: GgufType.UINT32, value: 1 },
    "tokenizer.ggml.eos_token_id": { type: GgufType.UINT32, value: vocab.imEnd },
    "tokenizer.ggml.add_bos_token": { type: GgufType.BOOL, value: false },
    "tokenizer.ggml.add_space_prefix": { type: GgufType.BOOL, value: false },
    "tokenizer.chat_template": { type: GgufType.STRING, value: CHATML_TEMPLATE },
  };

  const random = (scale: number) => (out: Float32Array) => { for (let i = 0; i < out.length; i++) out[i] = normal() * scale; };
  const ones = (out: Float32Array) => out.fill(1);
  const w = (name: string, dims: number[], fill: (out: Float32Array) => void, t: TensorType = type): TensorSpec => ({ name, dims, type: t, fill });
  const std = 1 / Math.sqrt(embedding);

  const tensors: TensorSpec[] = [w("token_embd.weight", [embedding, nVocab], random(1))];
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}`;
    tensors.push(
      w(`${p}.attn_norm.weight`, [embedding], ones, "f32"),
      w(`${p}.attn_q.weight`, [embedding, embedding], random(std)),
      w(`${p}.attn_k.weight`, [embedding, embedding], random(std)),
      w(`${p}.attn_v.weight`, [embedding, embedding], random(std)),
      w(`${p}.attn_output.weight`, [embedding, embedding], random(std)),
      w(`${p}.ffn_norm.weight`, [embedding], ones, "f32"),
      w(`${p}.ffn_gate.weight`, [embedding, feedForward], random(std)),
      w(`${p}.ffn_up.weight`, [embedding, feedForward], random(std)),
      w(`${p}.ffn_down.weight`, [feedForward, embedding], random(1 / Math.sqrt(feedForward))),
    );
  }
  tensors.push(w("output_norm.weight", [embedding], ones, "f32"), w("output.weight", [embedding, nVocab], random(std)));

  await writeGguf(path, meta, tensors);
  return { parameters: parameterCount({ embedding, layers, feedForward }, nVocab) };
}

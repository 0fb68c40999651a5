/**
 * Fabricates llama-architecture GGUF models with seeded random weights, a byte-level
 * SentencePiece vocabulary and a ChatML chat template. They load and run in the real
 * llama.cpp engine; what they say is noise, but every code path (template, tokenizer,
 * sampling, batching, usage counting) is the real one.
 */
import { GgufType, writeGguf, writeGgufSplit, type MetadataValue } from "./gguf-writer.js";
import { normalSource, type TensorSpec, type TensorType } from "./tensors.js";

export interface TinyLlamaOptions {
  /** Embedding width. Default 64. */
  embedding?: number;
  /** Transformer blocks. Default 2. */
  layers?: number;
  /** Attention heads. Default 4. */
  heads?: number;
  /** Key/value heads (grouped-query attention when fewer than `heads`). Default `heads`. */
  kvHeads?: number;
  /** RoPE frequency base. Default llama.cpp's (10000). */
  ropeFreqBase?: number;
  /** The tokenizer: default the byte-level SentencePiece vocabulary with ChatML; or one read from a real GGUF (`vocabularyFromGguf`). */
  vocabulary?: Vocabulary;
  /**
   * With the default vocabulary: pad it with filler words to this many tokens, a real model's size (Llama 3's
   * 128,256), since sampling a token reads every token's logit. Default none (262 tokens).
   */
  vocabularySize?: number;
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
const TOKEN_NORMAL = 1,
  TOKEN_UNKNOWN = 2,
  TOKEN_CONTROL = 3,
  TOKEN_BYTE = 6;

/**
 * The vocabulary: <unk>, <s>, </s>, the 256 byte tokens, "▁" (SentencePiece's escaped space, so that
 * spaces detokenize back to spaces), then ChatML's two control tokens.
 */
export function byteVocabulary(size = 0): { tokens: string[]; types: number[]; scores: number[]; imEnd: number } {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(TOKEN_BYTE);
  }
  tokens.push("\u2581", "<|im_start|>", "<|im_end|>");
  types.push(TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_CONTROL);
  const imEnd = tokens.length - 1;
  // filler words after the tokens above, so that those keep their ids
  for (let i = 0; tokens.length < size; i++) {
    tokens.push(`\u2581w${i.toString(36)}`);
    types.push(TOKEN_NORMAL);
  }
  return { tokens, types, scores: tokens.map(() => 0), imEnd };
}

/** A tokenizer as GGUF metadata (`tokenizer.*` keys) and its size. */
export interface Vocabulary {
  size: number;
  metadata: Record<string, MetadataValue>;
}

/** The default vocabulary as metadata: byte-level SentencePiece, ChatML. */
function byteVocabularyMetadata(size?: number): Vocabulary {
  const vocab = byteVocabulary(size);
  return {
    size: vocab.tokens.length,
    metadata: {
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
    },
  };
}

/** Llama 3's chat template (the tokens of llama.cpp's `ggml-vocab-llama-bpe.gguf` name its headers). */
export const LLAMA3_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

/**
 * A real tokenizer read from a GGUF (llama.cpp ships tokenizer-only ones in `models/ggml-vocab-*.gguf`):
 * its `tokenizer.ggml.*` entries, with `chatTemplate` when the file has none.
 */
export async function vocabularyFromGguf(path: string, chatTemplate?: string): Promise<Vocabulary> {
  const { readGgufFileInfo } = await import("node-llama-cpp");
  const info = await readGgufFileInfo(path, { readTensorInfo: false });
  const ggml = (info.metadata as unknown as { tokenizer: { ggml: Record<string, unknown>; chat_template?: string } }).tokenizer;
  const metadata: Record<string, MetadataValue> = {};
  for (const [key, value] of Object.entries(ggml.ggml)) {
    const name = `tokenizer.ggml.${key}`;
    if (typeof value === "string") metadata[name] = { type: GgufType.STRING, value };
    else if (typeof value === "boolean") metadata[name] = { type: GgufType.BOOL, value };
    else if (typeof value === "number") metadata[name] = { type: GgufType.UINT32, value };
    else if (Array.isArray(value) && typeof value[0] === "string") metadata[name] = { type: GgufType.ARRAY, itemType: GgufType.STRING, value: value as string[] };
    else if (Array.isArray(value) && key === "scores") metadata[name] = { type: GgufType.ARRAY, itemType: GgufType.FLOAT32, value: value as number[] };
    else if (Array.isArray(value)) metadata[name] = { type: GgufType.ARRAY, itemType: GgufType.INT32, value: value as number[] };
  }
  const template = ggml.chat_template ?? chatTemplate;
  if (template) metadata["tokenizer.chat_template"] = { type: GgufType.STRING, value: template };
  const tokens = ggml.ggml.tokens as string[] | undefined;
  if (!tokens?.length) throw new Error(`${path} holds no tokenizer.ggml.tokens`);
  return { size: tokens.length, metadata };
}

/** Parameter count of a model with these options (for naming and reporting). */
export function parameterCount(o: Required<Pick<TinyLlamaOptions, "embedding" | "layers" | "feedForward">> & { kvEmbedding?: number }, vocab: number): number {
  const kv = o.kvEmbedding ?? o.embedding;
  const perLayer = 2 * o.embedding * o.embedding + 2 * o.embedding * kv + 3 * o.embedding * o.feedForward + 2 * o.embedding;
  return 2 * vocab * o.embedding + o.layers * perLayer + o.embedding;
}

export async function writeTinyLlama(path: string, options: TinyLlamaOptions = {}): Promise<{ parameters: number }> {
  const { meta, tensors, parameters } = tinyLlama(options);
  await writeGguf(path, meta, tensors);
  return { parameters };
}

/**
 * The same model (the same options give the same weights) split in `parts` GGUFs as llama.cpp's
 * gguf-split writes them: `<prefix>-00001-of-0000N.gguf` …, loaded from the first part.
 */
export async function writeTinyLlamaSplit(prefix: string, parts: number, options: TinyLlamaOptions = {}): Promise<{ paths: string[]; parameters: number }> {
  const { meta, tensors, parameters } = tinyLlama(options);
  return { paths: await writeGgufSplit(prefix, parts, meta, tensors), parameters };
}

/** The model's metadata and tensors (filled as they are written). */
function tinyLlama(options: TinyLlamaOptions): { meta: Record<string, MetadataValue>; tensors: TensorSpec[]; parameters: number } {
  const embedding = options.embedding ?? 64;
  const layers = options.layers ?? 2;
  const heads = options.heads ?? 4;
  const kvHeads = options.kvHeads ?? heads;
  const kvEmbedding = (embedding / heads) * kvHeads;
  const feedForward = options.feedForward ?? embedding * 4;
  const type = options.type ?? "f32";
  const normal = normalSource(options.seed ?? 1);
  const vocabulary = options.vocabulary ?? byteVocabularyMetadata(options.vocabularySize);
  const nVocab = vocabulary.size;

  const meta: Record<string, MetadataValue> = {
    "general.architecture": { type: GgufType.STRING, value: "llama" },
    "general.name": { type: GgufType.STRING, value: options.name ?? "kiln-tiny-llama" },
    "general.alignment": { type: GgufType.UINT32, value: 32 },
    "llama.context_length": { type: GgufType.UINT32, value: options.contextLength ?? 2048 },
    "llama.embedding_length": { type: GgufType.UINT32, value: embedding },
    "llama.block_count": { type: GgufType.UINT32, value: layers },
    "llama.feed_forward_length": { type: GgufType.UINT32, value: feedForward },
    "llama.attention.head_count": { type: GgufType.UINT32, value: heads },
    "llama.attention.head_count_kv": { type: GgufType.UINT32, value: kvHeads },
    "llama.attention.layer_norm_rms_epsilon": { type: GgufType.FLOAT32, value: 1e-5 },
    "llama.rope.dimension_count": { type: GgufType.UINT32, value: embedding / heads },
    "llama.vocab_size": { type: GgufType.UINT32, value: nVocab },
    ...(options.ropeFreqBase !== undefined ? { "llama.rope.freq_base": { type: GgufType.FLOAT32, value: options.ropeFreqBase } } : {}),
    ...vocabulary.metadata,
  };

  const random = (scale: number) => (out: Float32Array) => {
    for (let i = 0; i < out.length; i++) out[i] = normal() * scale;
  };
  const ones = (out: Float32Array) => out.fill(1);
  const w = (name: string, dims: number[], fill: (out: Float32Array) => void, t: TensorType = type): TensorSpec => ({ name, dims, type: t, fill });
  const std = 1 / Math.sqrt(embedding);

  const tensors: TensorSpec[] = [w("token_embd.weight", [embedding, nVocab], random(1))];
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}`;
    tensors.push(
      w(`${p}.attn_norm.weight`, [embedding], ones, "f32"),
      w(`${p}.attn_q.weight`, [embedding, embedding], random(std)),
      w(`${p}.attn_k.weight`, [embedding, kvEmbedding], random(std)),
      w(`${p}.attn_v.weight`, [embedding, kvEmbedding], random(std)),
      w(`${p}.attn_output.weight`, [embedding, embedding], random(std)),
      w(`${p}.ffn_norm.weight`, [embedding], ones, "f32"),
      w(`${p}.ffn_gate.weight`, [embedding, feedForward], random(std)),
      w(`${p}.ffn_up.weight`, [embedding, feedForward], random(std)),
      w(`${p}.ffn_down.weight`, [feedForward, embedding], random(1 / Math.sqrt(feedForward))),
    );
  }
  tensors.push(w("output_norm.weight", [embedding], ones, "f32"), w("output.weight", [embedding, nVocab], random(std)));

  return { meta, tensors, parameters: parameterCount({ embedding, layers, feedForward, kvEmbedding }, nVocab) };
}

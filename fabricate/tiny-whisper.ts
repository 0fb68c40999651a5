/**
 * Fabricates whisper models in whisper.cpp's ggml format (the format its model files have),
 * with seeded random weights. They load and decode in the real whisper.cpp; what they write is
 * noise made of pseudo-words, but every path (mel, encoder, decoder, tokens, timestamps) is real.
 *
 * File layout (little-endian): u32 magic "ggml"; 11 × i32 hyper-parameters; the mel filter bank
 * (i32 n_mel, i32 n_fft, f32 data); the vocabulary (i32 count, then u32 length + bytes per token);
 * then every tensor (i32 n_dims, i32 name length, i32 type, dims innermost first, name, data).
 * Conv weights must be F16 (whisper.cpp aborts on F32 convs in an F16 model).
 */
import { elementCount, encodeTensor, GGML_TYPE_ID, normalSource, randomFill, uniformSource, writeAtomically, type TensorSpec } from "./tensors.js";

const GGML_MAGIC = 0x67676d6c;
/** Text tokens of the multilingual GPT-2 vocabulary; whisper.cpp names the specials past it. */
const TEXT_TOKENS = 50_257;
const N_VOCAB_MULTILINGUAL = 51_865;
const N_AUDIO_CTX = 1500;
const N_TEXT_CTX = 448;
const N_MELS = 80;
const N_FFT_BINS = 201;
const SPECIAL_SCALE = 1.5;

export interface TinyWhisperOptions {
  /** Width of encoder and decoder. Default 64. */
  state?: number;
  /** Attention heads. Default 2. */
  heads?: number;
  /** Layers in the encoder and in the decoder. Default 3 (whisper.cpp takes 2 decoder layers for a distilled model and drops timestamps). */
  layers?: number;
  /** PRNG seed: the same options write a byte-identical file. Default 7. */
  seed?: number;
}

/** A pseudo-word vocabulary: the 256 single bytes, then seeded syllables, most with a leading space. */
function vocabulary(seed: number): Buffer[] {
  const uniform = uniformSource(seed);
  const consonants = "bdfghklmnprstvz";
  const vowels = "aeiou";
  const pick = (s: string) => s[Math.floor(uniform() * s.length)]!;
  const tokens: Buffer[] = [];
  for (let b = 0; b < 256; b++) tokens.push(Buffer.from([b]));
  while (tokens.length < TEXT_TOKENS) {
    let word = uniform() < 0.7 ? " " : "";
    const syllables = 1 + Math.floor(uniform() * 3);
    for (let s = 0; s < syllables; s++) word += pick(consonants) + pick(vowels);
    tokens.push(Buffer.from(word, "utf8"));
  }
  return tokens;
}

/** A Slaney-style triangular mel filter bank for a 400-point FFT at 16 kHz (80 × 201). */
function melFilters(): Float32Array {
  const toMel = (hz: number) => 2595 * Math.log10(1 + hz / 700);
  const toHz = (mel: number) => 700 * (10 ** (mel / 2595) - 1);
  const top = toMel(8000);
  const points = Array.from({ length: N_MELS + 2 }, (_, i) => toHz((top * i) / (N_MELS + 1)));
  const out = new Float32Array(N_MELS * N_FFT_BINS);
  for (let m = 0; m < N_MELS; m++) {
    const [lo, mid, hi] = [points[m]!, points[m + 1]!, points[m + 2]!];
    const norm = 2 / (hi - lo);
    for (let k = 0; k < N_FFT_BINS; k++) {
      const hz = (k * 16000) / 400;
      const up = (hz - lo) / (mid - lo);
      const down = (hi - hz) / (hi - mid);
      out[m * N_FFT_BINS + k] = Math.max(0, Math.min(up, down)) * norm;
    }
  }
  return out;
}

export async function writeTinyWhisper(path: string, options: TinyWhisperOptions = {}): Promise<void> {
  const state = options.state ?? 64;
  const heads = options.heads ?? 2;
  const layers = options.layers ?? 3;
  const seed = options.seed ?? 7;
  const normal = normalSource(seed);
  const std = 1 / Math.sqrt(state);
  const zeros = (out: Float32Array) => out.fill(0);
  const ones = (out: Float32Array) => out.fill(1);
  const t = (name: string, dims: number[], fill: (out: Float32Array) => void, type: "f16" | "f32" = "f16"): TensorSpec => ({ name, dims, type, fill });
  const rand = (scale: number) => randomFill(normal, scale);

  const tensors: TensorSpec[] = [
    t("encoder.positional_embedding", [state, N_AUDIO_CTX], rand(0.1), "f32"),
    t("encoder.conv1.weight", [3, N_MELS, state], rand(1 / Math.sqrt(3 * N_MELS))),
    t("encoder.conv1.bias", [1, state], zeros, "f32"),
    t("encoder.conv2.weight", [3, state, state], rand(1 / Math.sqrt(3 * state))),
    t("encoder.conv2.bias", [1, state], zeros, "f32"),
    t("encoder.ln_post.weight", [state], ones, "f32"),
    t("encoder.ln_post.bias", [state], zeros, "f32"),
  ];
  const block = (p: string, cross: boolean): TensorSpec[] => {
    const attention = (a: string) => [
      t(`${p}.${a}.query.weight`, [state, state], rand(std)),
      t(`${p}.${a}.query.bias`, [state], zeros, "f32"),
      t(`${p}.${a}.key.weight`, [state, state], rand(std)),
      t(`${p}.${a}.value.weight`, [state, state], rand(std)),
      t(`${p}.${a}.value.bias`, [state], zeros, "f32"),
      t(`${p}.${a}.out.weight`, [state, state], rand(std)),
      t(`${p}.${a}.out.bias`, [state], zeros, "f32"),
      t(`${p}.${a}_ln.weight`, [state], ones, "f32"),
      t(`${p}.${a}_ln.bias`, [state], zeros, "f32"),
    ];
    return [
      ...attention("attn"),
      ...(cross ? attention("cross_attn") : []),
      t(`${p}.mlp_ln.weight`, [state], ones, "f32"),
      t(`${p}.mlp_ln.bias`, [state], zeros, "f32"),
      t(`${p}.mlp.0.weight`, [state, 4 * state], rand(std)),
      t(`${p}.mlp.0.bias`, [4 * state], zeros, "f32"),
      t(`${p}.mlp.2.weight`, [4 * state, state], rand(1 / Math.sqrt(4 * state))),
      t(`${p}.mlp.2.bias`, [state], zeros, "f32"),
    ];
  };
  for (let l = 0; l < layers; l++) tensors.push(...block(`encoder.blocks.${l}`, false));
  tensors.push(
    t("decoder.positional_embedding", [state, N_TEXT_CTX], rand(0.1), "f32"),
    t("decoder.token_embedding.weight", [state, N_VOCAB_MULTILINGUAL], (out) => {
      // Rows past the text tokens (end of text, timestamps) get a larger norm, so that the
      // tied output projection emits them often: short segments with timestamps, as speech gives.
      randomFill(normal, 1)(out);
      for (let i = TEXT_TOKENS * state; i < out.length; i++) out[i]! *= SPECIAL_SCALE;
    }),
    t("decoder.ln.weight", [state], ones, "f32"),
    t("decoder.ln.bias", [state], zeros, "f32"),
  );
  for (let l = 0; l < layers; l++) tensors.push(...block(`decoder.blocks.${l}`, true));

  const i32 = (...values: number[]) => {
    const b = Buffer.alloc(4 * values.length);
    values.forEach((v, i) => b.writeInt32LE(v, 4 * i));
    return b;
  };
  await writeAtomically(path, async (write) => {
    const magic = Buffer.alloc(4);
    magic.writeUInt32LE(GGML_MAGIC);
    await write(magic);
    await write(i32(N_VOCAB_MULTILINGUAL, N_AUDIO_CTX, state, heads, layers, N_TEXT_CTX, state, heads, layers, N_MELS, 1));
    const filters = melFilters();
    await write(i32(N_MELS, N_FFT_BINS));
    await write(Buffer.from(filters.buffer, filters.byteOffset, filters.byteLength));
    const vocab = vocabulary(seed);
    await write(i32(vocab.length));
    for (const token of vocab) {
      await write(i32(token.length));
      await write(token);
    }
    for (const spec of tensors) {
      const name = Buffer.from(spec.name, "utf8");
      await write(i32(spec.dims.length, name.length, GGML_TYPE_ID[spec.type], ...spec.dims));
      await write(name);
      const data = encodeTensor(spec);
      if (data.length !== elementCount(spec.dims) * (spec.type === "f16" ? 2 : 4)) throw new Error(`bad size for ${spec.name}`);
      await write(data);
    }
  });
}

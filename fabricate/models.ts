/**
 * Model fabrication: the random-weight models the tests, `kiln dev` and the benchmarks run on, written
 * by Kiln's own GGUF, whisper ggml and ONNX writers (this folder). `scripts/make-test-models.ts` is its
 * command (`node dist/scripts/make-test-models.js [--out DIR] [--bench] [--realistic VOCAB.gguf]`).
 *
 * - `tiny-chat.gguf`: ~90 K parameters, loads and generates in milliseconds (the suite's model).
 * - `tiny-chat-split-00001-of-00002.gguf`, `…-00002-of-00002.gguf`: the same model (the same weights)
 *   split in two as llama.cpp's gguf-split writes it (what a hub serves for a model too large for one file).
 * - `bench-45m.gguf` (with `--bench`): ~45 M parameters, big enough that compute dominates (benchmarks).
 * - `tiny-wide-vocab.gguf`: the tiny model's shape with Llama 3's vocabulary size (128,256 tokens, filler
 *   words after the byte-level ones), where sampling a token costs what it costs on a real model.
 * - `llama-3.2-1b-shape-f16.gguf` (with `--realistic VOCAB.gguf`): Llama-3.2-1B's shape (2048 wide, 16
 *   layers, 32 heads over 8 KV heads, 8192 feed-forward, RoPE base 500 000) with a real tokenizer
 *   (llama.cpp's `models/ggml-vocab-llama-bpe.gguf`, Llama 3's), untied output: ~1.5 B parameters in
 *   F16, 3 GB (the GPU benchmarks quantize it with llama-quantize).
 *
 * - `whisper/ggml-base.bin`: a tiny random-weight whisper (state 64, 3 layers) under the catalog
 *   name `base`, so a whisper directory of test models answers to the default model.
 * - `energy-vad.onnx`: a voice-activity model with Silero v5's interface that thresholds energy.
 * - `random-segmentation.onnx`, `random-embedding.onnx`: speaker-diarization models of the pyannote
 *   and wespeaker shapes with random weights (fabricate/diarization-models.ts).
 *
 * Files are seeded, so the same options write byte-identical files; existing files are kept.
 */
import { mkdir, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { writeDiarizationModels } from "./diarization-models.js";
import { writeEnergyVad } from "./energy-vad.js";
import { splitPartPath } from "./gguf-writer.js";
import { LLAMA3_TEMPLATE, vocabularyFromGguf, writeTinyLlama, writeTinyLlamaSplit, type TinyLlamaOptions } from "./tiny-llama.js";
import { writeTinyWhisper } from "./tiny-whisper.js";

export const TEST_MODELS = {
  tiny: { file: "tiny-chat.gguf", options: { embedding: 64, layers: 2, heads: 4, name: "kiln-tiny-chat" } },
  bench: { file: "bench-45m.gguf", options: { embedding: 768, layers: 6, heads: 12, feedForward: 2048, name: "kiln-bench-45m" } },
  wideVocab: { file: "tiny-wide-vocab.gguf", options: { embedding: 64, layers: 2, heads: 4, vocabularySize: 128_256, name: "kiln-tiny-wide-vocab" } },
} satisfies Record<string, { file: string; options: TinyLlamaOptions }>;

/** Llama-3.2-1B's shape, for the GPU benchmarks (random weights, a real tokenizer given at writing). */
export const REALISTIC_LLAMA = {
  file: "llama-3.2-1b-shape-f16.gguf",
  options: { embedding: 2048, layers: 16, heads: 32, kvHeads: 8, feedForward: 8192, ropeFreqBase: 500_000, contextLength: 131_072, type: "f16", name: "kiln-llama-3.2-1b-shape" },
} satisfies { file: string; options: TinyLlamaOptions };

/** Writes a random-weight model of `options`' shape with the tokenizer of `vocabGguf` (Llama 3's template when it has none). */
export async function writeWithVocabulary(path: string, vocabGguf: string, options: TinyLlamaOptions = REALISTIC_LLAMA.options): Promise<{ parameters: number }> {
  return writeTinyLlama(path, { ...options, vocabulary: await vocabularyFromGguf(vocabGguf, LLAMA3_TEMPLATE) });
}

/** The default folder for fabricated models: `.kiln/test-models` under the project root. */
export function defaultModelDir(root = process.cwd()): string {
  return resolve(root, ".kiln", "test-models");
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

/** Writes a model unless it exists already; returns its path. */
export async function ensureTestModel(kind: keyof typeof TEST_MODELS, dir = defaultModelDir()): Promise<string> {
  const { file, options } = TEST_MODELS[kind];
  const path = join(dir, file);
  if (!(await exists(path))) {
    await mkdir(dir, { recursive: true });
    await writeTinyLlama(path, options);
  }
  return path;
}

/** The tiny model split in two GGUFs (llama.cpp's split naming after `prefix`). */
export const TEST_SPLIT_MODEL = { prefix: "tiny-chat-split", parts: 2, options: TEST_MODELS.tiny.options } as const;

/** Writes the split tiny model unless every part exists; returns its parts' paths, first part first (the one a model is loaded from). */
export async function ensureTestSplitModel(dir = defaultModelDir()): Promise<string[]> {
  const { prefix, parts, options } = TEST_SPLIT_MODEL;
  const paths = Array.from({ length: parts }, (_, i) => splitPartPath(join(dir, prefix), i + 1, parts));
  if (!(await Promise.all(paths.map(exists))).every(Boolean)) {
    await mkdir(dir, { recursive: true });
    await writeTinyLlamaSplit(join(dir, prefix), parts, options);
  }
  return paths;
}

/** The fabricated speech models: a whisper directory holding `ggml-base.bin`, and a VAD model. */
export const TEST_SPEECH = {
  whisperDir: "whisper",
  whisperFile: "ggml-base.bin",
  vad: "energy-vad.onnx",
  segmentation: "random-segmentation.onnx",
  embedding: "random-embedding.onnx",
} as const;

/** Writes the speech test models unless they exist; returns the whisper directory and the VAD file. */
export async function ensureTestSpeechModels(dir = defaultModelDir()): Promise<{ whisperDir: string; vadModel: string; segmentationModel: string; embeddingModel: string }> {
  const whisperDir = join(dir, TEST_SPEECH.whisperDir);
  const whisperFile = join(whisperDir, TEST_SPEECH.whisperFile);
  const vadModel = join(dir, TEST_SPEECH.vad);
  await mkdir(dirname(whisperFile), { recursive: true });
  if (!(await exists(whisperFile))) await writeTinyWhisper(whisperFile);
  if (!(await exists(vadModel))) await writeEnergyVad(vadModel);
  const segmentationModel = join(dir, TEST_SPEECH.segmentation);
  const embeddingModel = join(dir, TEST_SPEECH.embedding);
  if (!(await exists(segmentationModel)) || !(await exists(embeddingModel))) await writeDiarizationModels(segmentationModel, embeddingModel);
  return { whisperDir, vadModel, segmentationModel, embeddingModel };
}

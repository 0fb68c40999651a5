/**
 * Fabricated speaker-diarization models with seeded random weights, in the shapes and with the
 * metadata sherpa-onnx expects, so the suite runs the real native diarization on a fresh clone.
 *
 * - Segmentation (pyannote-segmentation-3.0's interface): `x` [1, 1, 160000] → `y` [1, 589, 7]
 *   log-probabilities over the powerset classes, from one strided convolution with the model's
 *   receptive field (991 samples, shift 270) and a log-softmax.
 * - Embedding (a wespeaker-style model): fbank `x` [1, T, 80] → `embedding` [1, D], the mean over
 *   time of the frames times a random projection.
 */
import { writeFile } from "node:fs/promises";
import { encodeOnnxModel, OnnxType } from "./onnx-writer.js";
import { normalSource } from "./tensors.js";

export const SEGMENTATION = { windowSize: 160_000, receptiveFieldSize: 991, receptiveFieldShift: 270, classes: 7 } as const;

function randomValues(count: number, scale: number, seed: number): Float32Array {
  const normal = normalSource(seed);
  return Float32Array.from({ length: count }, () => normal() * scale);
}

/**
 * Class logits = a random strided filter bank over the waveform (which "speaker" a sound looks
 * like) + the window's log power times a per-class weight (silence wins on quiet windows, a
 * speaker on loud ones), then a log-softmax: random, but silence is silence.
 */
export function segmentationModel(seed = 11): Buffer {
  const { windowSize, receptiveFieldSize: k, receptiveFieldShift: stride, classes } = SEGMENTATION;
  const frames = Math.floor((windowSize - k) / stride) + 1;
  const silenceLogPower = Math.log(1e-4); // −40 dBFS
  // Per-class weight on log power, and biases that put the silence/speech boundary at −40 dBFS.
  const powerWeight = [-2, 1, 1, 1, 0.5, 0.5, 0.5];
  const bias = [3 * silenceLogPower, 0, 0, 0, -4, -4, -4];
  return encodeOnnxModel({
    name: "kiln-random-segmentation",
    inputs: [{ name: "x", type: OnnxType.FLOAT, shape: [1, 1, windowSize] }],
    outputs: [{ name: "y", type: OnnxType.FLOAT, shape: [1, frames, classes] }],
    initializers: [
      { name: "filters", dims: [classes, 1, k], values: randomValues(classes * k, 0.3, seed) },
      { name: "bias", dims: [classes], values: bias },
      { name: "average", dims: [1, 1, k], values: new Float32Array(k).fill(1 / k) },
      { name: "eps", dims: [1], values: [1e-10] },
      { name: "power_weight", dims: [1, classes, 1], values: powerWeight },
    ],
    nodes: [
      { op: "Conv", inputs: ["x", "filters", "bias"], outputs: ["shape_logits"], attributes: { kernel_shape: [k], strides: [stride] } },
      { op: "Mul", inputs: ["x", "x"], outputs: ["power"] },
      { op: "Conv", inputs: ["power", "average"], outputs: ["mean_power"], attributes: { kernel_shape: [k], strides: [stride] } },
      { op: "Add", inputs: ["mean_power", "eps"], outputs: ["mean_power_eps"] },
      { op: "Log", inputs: ["mean_power_eps"], outputs: ["log_power"] },
      { op: "Mul", inputs: ["log_power", "power_weight"], outputs: ["power_logits"] },
      { op: "Add", inputs: ["shape_logits", "power_logits"], outputs: ["logits_ct"] },
      { op: "Transpose", inputs: ["logits_ct"], outputs: ["logits"], attributes: { perm: [0, 2, 1] } },
      { op: "LogSoftmax", inputs: ["logits"], outputs: ["y"], attributes: { axis: -1 } },
    ],
    metadata: {
      model_type: "pyannote-segmentation-3.0",
      version: "1",
      sample_rate: "16000",
      window_size: String(windowSize),
      receptive_field_size: String(k),
      receptive_field_shift: String(stride),
      num_speakers: "3",
      powerset_max_classes: "2",
      num_classes: String(classes),
    },
  });
}

export function embeddingModel(dim = 64, seed = 13): Buffer {
  return encodeOnnxModel({
    name: "kiln-random-embedding",
    inputs: [{ name: "x", type: OnnxType.FLOAT, shape: [1, "T", 80] }],
    outputs: [{ name: "embedding", type: OnnxType.FLOAT, shape: [1, dim] }],
    initializers: [{ name: "w", dims: [80, dim], values: randomValues(80 * dim, 1 / Math.sqrt(80), seed) }],
    nodes: [
      { op: "ReduceMean", inputs: ["x"], outputs: ["mean"], attributes: { axes: [1], keepdims: 0 } },
      { op: "MatMul", inputs: ["mean", "w"], outputs: ["embedding"] },
    ],
    metadata: {
      framework: "wespeaker",
      sample_rate: "16000",
      output_dim: String(dim),
      normalize_samples: "1",
      language: "English",
      feature_normalize_type: "global-mean",
    },
  });
}

export async function writeDiarizationModels(segmentationPath: string, embeddingPath: string): Promise<void> {
  await writeFile(segmentationPath, segmentationModel());
  await writeFile(embeddingPath, embeddingModel());
}

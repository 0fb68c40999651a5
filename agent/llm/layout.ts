/**
 * How a replica sits on a node's GPUs: the scheduler plans bytes per device (in the order llama.cpp
 * lists its GPU devices, which is the order a placeable node offers them), and llama.cpp is told the
 * same with its own options, as llama-server's `--split-mode`, `--main-gpu` and `--tensor-split` do:
 *
 * - one device holds it all: `split_mode` none on that device (`main_gpu`), so no other GPU is touched;
 * - several devices: llama.cpp's layer split, in the planned proportions (`tensor_split`).
 */

/** The llama.cpp model options that place a model on a node's GPUs (node-llama-cpp's `loadModel`, as Kiln patches it). */
export type GpuLayout = { splitMode: "none"; mainGpu: number } | { splitMode: "layer"; tensorSplit: number[] };

/** The layout for `bytes` planned per device; undefined when the plan names no device (llama.cpp's default then). */
export function gpuLayout(bytes: readonly number[]): GpuLayout | undefined {
  const total = bytes.reduce((a, b) => a + (b > 0 ? b : 0), 0);
  if (!(total > 0)) return undefined;
  const used = bytes.flatMap((b, i) => (b > 0 ? [i] : []));
  if (used.length === 1) return { splitMode: "none", mainGpu: used[0]! };
  return { splitMode: "layer", tensorSplit: bytes.map((b) => (b > 0 ? b / total : 0)) };
}

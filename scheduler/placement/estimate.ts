/**
 * How much memory one replica of a catalog model takes, from the GGUF's own header: its weights,
 * its KV cache for the catalog's context and sequences, and llama.cpp's compute buffers, as
 * node-llama-cpp's `GgufInsights` computes them (no backend is loaded: only its arithmetic). The
 * header is read from the model hub (node-llama-cpp's ranged reads; every part of a split file)
 * or from a path the scheduler can read; a catalog entry's `memory_bytes` replaces the estimate.
 *
 * The figure is the larger of the model run on the CPU and the model offloaded whole to a GPU (the
 * VRAM then, plus what stays in system memory), so that one figure holds for every kind of node.
 */
import { GgufInsights, readGgufFileInfo } from "node-llama-cpp";
import { parseRef, resolveQuant, resolveUrl, type HubSource } from "../../hub/index.js";

export interface ReplicaShape {
  /** Context tokens per sequence (capped at the model's trained context, as the agent caps it). */
  contextSize: number;
  /** Parallel sequences (slots). */
  sequences: number;
}

export interface ReplicaSize {
  bytes: number;
  /** Of `bytes`, what the contexts take (KV cache and compute buffers): a second context on the same weights takes this much more. */
  contextBytes: number;
  /** The context the replica gets: the catalog's, capped at the model's trained context. */
  contextSize: number;
}

/** Metadata arrays the estimate does not need and a hostile or huge file could make large (the vocabulary). */
const IGNORED_KEYS = ["tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"];

/** The estimate for a GGUF at `file` (a path, or a URL with its headers). */
export async function estimateReplica(file: string, shape: ReplicaShape, options: { headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<ReplicaSize> {
  const info = await readGgufFileInfo(file, {
    logWarnings: false,
    ignoreKeys: IGNORED_KEYS,
    ...(options.headers ? { fetchHeaders: options.headers } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    fetchRetryOptions: { retries: 2 },
  });
  const insights = await GgufInsights.from(info);
  const contextSize = Math.min(shape.contextSize, insights.trainContextSize ?? shape.contextSize);
  const layers = insights.totalLayers;
  const run = (gpuLayers: number) => {
    const model = insights.estimateModelResourceRequirements({ gpuLayers });
    const context = insights.estimateContextResourceRequirements({ contextSize, modelGpuLayers: gpuLayers, sequences: shape.sequences });
    return { bytes: model.cpuRam + model.gpuVram + context.cpuRam + context.gpuVram, contextBytes: context.cpuRam + context.gpuVram };
  };
  const [cpu, gpu] = [run(0), run(layers)];
  const larger = cpu.bytes >= gpu.bytes ? cpu : gpu;
  return { bytes: Math.ceil(larger.bytes), contextBytes: Math.ceil(larger.contextBytes), contextSize };
}

/** Where a catalog source's GGUF header is read from: a hub URL (`hf:` references), or the path itself. */
export async function headerLocation(source: string, hub: HubSource, signal?: AbortSignal): Promise<{ file: string; headers?: Record<string, string> }> {
  if (!source.startsWith("hf:")) return { file: source };
  const ref = parseRef(source);
  const headers = hub.token ? { Authorization: `Bearer ${hub.token}` } : undefined;
  const at = (repo: string, revision: string, path: string) => ({ file: resolveUrl(hub, repo, revision, path), ...(headers ? { headers } : {}) });
  switch (ref.kind) {
    case "gguf":
      return at(`${ref.org}/${ref.repo}`, ref.revision, ref.path);
    case "gguf-quant":
      return at(`${ref.org}/${ref.repo}`, "main", await resolveQuant(hub, ref.org, ref.repo, ref.quant, signal));
    default:
      throw new Error(`${source} is not a GGUF reference`);
  }
}

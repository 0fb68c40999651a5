/**
 * Speaker diarization: sherpa-onnx's offline pipeline (pyannote segmentation, speaker
 * embeddings, clustering) in a child process (engine/task.ts), so a native crash fails only this
 * task. Both models' metadata is checked first: sherpa-onnx ends its process (segfault or abort)
 * on an embedding model with missing or wrong metadata.
 */
import { readFile } from "node:fs/promises";
import { readOnnxSignature } from "../../../core/onnx.js";
import { EngineError } from "../errors.js";
import type { DiarizationSegment } from "../sherpa.js";
import { runTask } from "../engine/task.js";
import type { DiarizeRequest } from "./protocol.js";

export type { DiarizationSegment } from "../sherpa.js";

export interface DiarizationModels {
  /** pyannote segmentation ONNX as exported for sherpa-onnx. */
  segmentation: string;
  /** Speaker-embedding ONNX (wespeaker or 3d-speaker metadata). */
  embedding: string;
}

const SEGMENTATION_KEYS = ["sample_rate", "window_size", "receptive_field_size", "receptive_field_shift", "num_speakers", "powerset_max_classes", "num_classes"];

async function metadata(path: string, what: string): Promise<{ meta: Record<string, string>; outputs: string[] }> {
  const bytes = await readFile(path).catch((err: NodeJS.ErrnoException) => {
    throw new EngineError(`${what} ${path} cannot be read (${err.code ?? err.message})`);
  });
  try {
    const sig = readOnnxSignature(bytes);
    return { meta: sig.metadata, outputs: sig.outputs };
  } catch {
    throw new EngineError(`${what} ${path} is not an ONNX file`);
  }
}

const checked = new Map<string, Promise<void>>();

/** Refuses models whose metadata would crash sherpa-onnx. Cached per pair of paths. */
export function checkDiarizationModels(models: DiarizationModels): Promise<void> {
  const key = `${models.segmentation}\n${models.embedding}`;
  let pending = checked.get(key);
  if (!pending) {
    pending = (async () => {
      const seg = await metadata(models.segmentation, "segmentation model");
      const missing = SEGMENTATION_KEYS.filter((k) => !/^\d+$/.test(seg.meta[k] ?? ""));
      if (missing.length) throw new EngineError(`segmentation model ${models.segmentation} lacks pyannote metadata: ${missing.join(", ")}`);
      if (seg.meta.sample_rate !== "16000") throw new EngineError(`segmentation model ${models.segmentation}: sample_rate must be 16000`);
      const emb = await metadata(models.embedding, "speaker-embedding model");
      const m = emb.meta;
      const problems = [
        !["wespeaker", "3d-speaker"].includes(m.framework ?? "") && "framework (wespeaker or 3d-speaker)",
        m.sample_rate !== "16000" && "sample_rate (16000)",
        !/^\d+$/.test(m.output_dim ?? "") && "output_dim",
        !/^[01]$/.test(m.normalize_samples ?? "") && "normalize_samples (0 or 1)",
        !m.language && "language",
        m.feature_normalize_type !== undefined && !["", "global-mean"].includes(m.feature_normalize_type) && "feature_normalize_type",
        emb.outputs.length !== 1 && "a single output",
      ].filter(Boolean);
      if (problems.length) throw new EngineError(`speaker-embedding model ${models.embedding} has missing or bad metadata: ${problems.join(", ")}`);
    })();
    pending.catch(() => checked.delete(key));
    checked.set(key, pending);
  }
  return pending;
}

export interface DiarizeOptions {
  minSpeakers?: number;
  maxSpeakers?: number;
  /** Clustering threshold when the count is free. Default 0.5 (sherpa-onnx's). */
  threshold?: number;
}

/** Speaker turns of a 16 kHz f32le PCM file (seconds, cluster indices). */
export async function diarize(pcmPath: string, models: DiarizationModels, options: DiarizeOptions, signal?: AbortSignal): Promise<DiarizationSegment[]> {
  await checkDiarizationModels(models);
  const request: DiarizeRequest = {
    pcmPath,
    segmentation: models.segmentation,
    embedding: models.embedding,
    threshold: options.threshold ?? 0.5,
    ...(options.minSpeakers !== undefined ? { minSpeakers: options.minSpeakers } : {}),
    ...(options.maxSpeakers !== undefined ? { maxSpeakers: options.maxSpeakers } : {}),
  };
  return runTask<DiarizeRequest, DiarizationSegment[]>("diarize/worker.js", "speaker diarization", request, undefined, signal);
}

/**
 * The diarization worker process (engine/task.ts): sherpa-onnx's offline speaker diarization
 * (pyannote segmentation + speaker embeddings + clustering) over a PCM file, off the agent's event
 * loop. When clustering by threshold gives a speaker count outside [min, max], it clusters again
 * with the count clamped.
 */
import { PcmFile } from "../pcm.js";
import { loadSherpa, type DiarizationSegment } from "../sherpa.js";
import { serveTask } from "../engine/task.js";
import type { DiarizeRequest } from "./protocol.js";

const speakerCount = (segments: DiarizationSegment[]) => new Set(segments.map((s) => s.speaker)).size;

async function main(request: DiarizeRequest): Promise<DiarizationSegment[]> {
  const pcm = await PcmFile.open(request.pcmPath);
  let samples: Float32Array;
  try {
    samples = await pcm.read(0, pcm.samples);
  } finally {
    await pcm.close();
  }
  const { minSpeakers: min, maxSpeakers: max } = request;
  const fixed = min !== undefined && min === max ? min : undefined;
  const sd = new (loadSherpa().OfflineSpeakerDiarization)({
    segmentation: { pyannote: { model: request.segmentation }, numThreads: 1 },
    embedding: { model: request.embedding, numThreads: 1 },
    clustering: { numClusters: fixed ?? -1, threshold: request.threshold },
    minDurationOn: 0.2,
    minDurationOff: 0.5,
  });
  let segments = sd.process(samples);
  const found = speakerCount(segments);
  if (fixed === undefined && found > 0) {
    const clamped = Math.min(max ?? found, Math.max(min ?? found, found));
    if (clamped !== found) {
      sd.setConfig({ clustering: { numClusters: clamped, threshold: request.threshold } });
      segments = sd.process(samples);
    }
  }
  return segments;
}

serveTask(main);

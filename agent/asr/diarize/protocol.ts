/** The request to the diarization worker process. */
import type { DiarizationSegment } from "../sherpa.js";

export interface DiarizeRequest {
  pcmPath: string;
  segmentation: string;
  embedding: string;
  /** Fixed speaker count, or undefined to cluster by threshold. */
  minSpeakers?: number;
  maxSpeakers?: number;
  threshold: number;
}

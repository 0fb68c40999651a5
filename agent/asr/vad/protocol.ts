/** The request to the VAD worker process, and its answer. */

/** A stretch of speech, in samples of the 16 kHz stream: [start, end). */
export interface SpeechSpan {
  start: number;
  end: number;
}

export interface VadRequest {
  pcmPath: string;
  model: string;
  threshold: number;
  minSilenceSeconds: number;
  minSpeechSeconds: number;
  maxSpeechSeconds: number;
}

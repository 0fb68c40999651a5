/**
 * Why a transcription job ends in `error`. The message is shown to the user as the job's
 * `error`, so it says what is wrong with their file in their terms.
 */
export class AudioError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AudioError";
  }
}

/** A native engine (whisper, ffmpeg, the VAD) failed on input that looked valid. */
export class EngineError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "EngineError";
  }
}

/** The job was stopped (agent shutting down) before it finished. */
export class JobAbortedError extends Error {
  constructor(message = "the agent stopped before this job finished") {
    super(message);
    this.name = "JobAbortedError";
  }
}

import type { ErrorCode } from "../../core/error-codes.js";
import { KilnError } from "../../core/errors.js";

/**
 * Why a transcription job ends in `error`. The message is shown to the user as the job's
 * `error`, so it says what is wrong with their file in their terms.
 */
export class AudioError extends KilnError<ErrorCode> {
  constructor(message: string) {
    super("invalid_audio", message);
  }
}

/** A native engine (whisper, ffmpeg, the VAD) failed on input that looked valid. */
export class EngineError extends KilnError<ErrorCode> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("engine_error", message, options);
  }
}

/** The job was stopped (agent shutting down) before it finished. */
export class JobAbortedError extends KilnError<ErrorCode> {
  constructor(message = "the agent stopped before this job finished") {
    super("job_aborted", message);
  }
}

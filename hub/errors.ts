import { KilnError } from "../core/errors.js";

/**
 * Why a model could not be pulled. The message names the model and the hub (never a token) and
 * says what to do: it is shown to the operator by `kiln models pull`, and to the user as a job's
 * error when an instance fetched a whisper model on demand.
 */
export class PullError extends KilnError {
  constructor(
    code: "bad_ref" | "hub_unreachable" | "hub_refused" | "not_found" | "checksum_mismatch" | "insufficient_disk" | "not_supported",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

import { KilnError } from "../core/errors.js";

export type PullErrorCode = "bad_ref" | "hub_unreachable" | "hub_refused" | "not_found" | "checksum_mismatch" | "insufficient_disk" | "not_supported" | "busy";

/** What each failure tells someone who must not see this machine's paths, disk or the hub's signed addresses (a job's user). */
const BRIEF: Record<PullErrorCode, string> = {
  bad_ref: "it is not a reference Kiln can fetch",
  hub_unreachable: "the hub could not be reached, or the download stopped",
  hub_refused: "the hub refused it (a gated repository)",
  not_found: "the hub has no such file",
  checksum_mismatch: "the file did not match its checksum",
  insufficient_disk: "this node has too little free disk for it",
  not_supported: "Kiln cannot fetch that kind of file yet",
  busy: "another Kiln process is downloading it",
};

/**
 * Why a model could not be pulled. The message starts with the reference and the hub
 * (`whisper:small could not be fetched from https://huggingface.co: …`) and says what to do: it is
 * for the operator (`kiln models pull`, the agent's log). `brief` is the same without this
 * machine's details, for a job's user.
 */
export class PullError extends KilnError {
  declare readonly code: PullErrorCode;

  constructor(code: PullErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }

  /** `<what> could not be fetched from <hub>: <why, in general terms>`, given the message's start. */
  brief(subject: string): string {
    return `${subject}: ${BRIEF[this.code]}`;
  }
}

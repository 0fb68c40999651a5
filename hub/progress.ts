import type { Logger } from "../core/log.js";
import type { PullProgress } from "./download.js";

/** How often a download's progress is logged. */
const EVERY_MS = 1000;

/**
 * An `onProgress` that logs a download as one JSON line a second at most (bytes, speed, ETA):
 * what `kiln models pull` prints off a terminal and what an agent logs of its pulls.
 */
export function logProgress(logger: Logger, ref: string): (p: PullProgress) => void {
  let last = 0;
  let whole = false;
  return (p) => {
    const now = Date.now();
    const done = p.totalBytes > 0 && p.downloadedBytes >= p.totalBytes;
    if (whole || (now - last < EVERY_MS && !done)) return;
    last = now;
    whole = done;
    logger.info(
      {
        model: ref,
        downloaded_bytes: p.downloadedBytes,
        total_bytes: p.totalBytes,
        bytes_per_second: Math.round(p.bytesPerSecond),
        eta_seconds: Number.isFinite(p.etaSeconds) ? Math.ceil(p.etaSeconds) : null,
      },
      "downloading",
    );
  };
}

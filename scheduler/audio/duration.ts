/**
 * The most seconds of audio an upload can hold, read by the scheduler itself, so a node's
 * transcript cannot charge its account for more: a WAV file's header gives its duration (its data
 * bytes over its byte rate); any other file is bounded by its size at a bitrate below every codec
 * a transcription takes in practice (MIN_BITRATE_BPS: Opus, the leanest, goes down to 6 kbit/s).
 */
import { closeSync, openSync, readSync } from "node:fs";

/** The lowest bitrate an upload is assumed to have, in bits per second: a bound, not an estimate. */
export const MIN_BITRATE_BPS = 4000;
/** Seconds added to a WAV header's duration (rounding, a decoder's padding). */
const WAV_MARGIN_SECONDS = 1;
/** Bytes of a file read to find a WAV header's `fmt ` and `data` chunks. */
const HEADER_BYTES = 64 * 1024;

/** The duration of a WAV file from its header, or undefined when `head` is not one. `size` is the whole file's. */
export function wavSeconds(head: Buffer, size: number): number | undefined {
  if (head.length < 12 || head.toString("latin1", 0, 4) !== "RIFF" || head.toString("latin1", 8, 12) !== "WAVE") return undefined;
  let byteRate: number | undefined;
  let at = 12;
  while (at + 8 <= head.length) {
    const id = head.toString("latin1", at, at + 4);
    const length = head.readUInt32LE(at + 4);
    if (id === "fmt " && at + 16 <= head.length) byteRate = head.readUInt32LE(at + 16);
    if (id === "data") {
      if (!byteRate) return undefined;
      // a streamed WAV's data length may be 0 or 0xFFFFFFFF: the bytes actually there bound it
      const data = Math.min(length === 0 ? Infinity : length, size - (at + 8));
      return Math.max(0, data) / byteRate;
    }
    at += 8 + length + (length % 2);
  }
  return undefined;
}

/** The most seconds `size` bytes of any audio can hold (MIN_BITRATE_BPS). */
export function sizeBoundSeconds(size: number): number {
  return (size * 8) / MIN_BITRATE_BPS;
}

/**
 * The most seconds of audio the file at `path` (`size` bytes) holds: its WAV header's duration
 * (plus a second), never more than its size allows at MIN_BITRATE_BPS.
 */
export function audioSecondsBound(path: string, size: number): number {
  const bySize = sizeBoundSeconds(size);
  let head: Buffer;
  try {
    const fd = openSync(path, "r");
    try {
      head = Buffer.alloc(Math.min(HEADER_BYTES, size));
      head = head.subarray(0, readSync(fd, head, 0, head.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return bySize;
  }
  const wav = wavSeconds(head, size);
  return wav === undefined ? bySize : Math.min(bySize, Math.ceil(wav) + WAV_MARGIN_SECONDS);
}

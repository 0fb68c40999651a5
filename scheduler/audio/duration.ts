/**
 * The most seconds of audio an upload can hold, read by the scheduler itself, so a node's
 * transcript cannot charge its account for more: a WAV file's header gives its duration (its data
 * bytes over its byte rate) when the header is self-consistent; any other file is bounded by its
 * size at a bitrate below every codec a transcription takes in practice (MIN_BITRATE_BPS: Opus,
 * the leanest, goes down to 6 kbit/s). The file is the tenant's: a header that does not add up
 * (a byte rate no format has, a first data chunk that ends well before the file does) gets the
 * size-based bound, so a crafted header cannot shrink the bound below the audio the file holds.
 */
import { open } from "node:fs/promises";

/** The lowest bitrate an upload is assumed to have, in bits per second: a bound, not an estimate. */
export const MIN_BITRATE_BPS = 4000;
/** Seconds added to a WAV header's duration (rounding, a decoder's padding). */
const WAV_MARGIN_SECONDS = 1;
/** Bytes of a file read to find a WAV header's `fmt ` and `data` chunks. */
const HEADER_BYTES = 64 * 1024;
/** Bytes a WAV file may hold after its first data chunk (a trailing LIST or id3 chunk) for its header to count. */
export const WAV_TRAILING_SLACK = 4 * 1024;
/** WAVE_FORMAT_PCM and WAVE_FORMAT_IEEE_FLOAT: formats whose byte rate is sampleRate × blockAlign. */
const WAV_FORMATS = new Set([1, 3]);
/** The highest sample rate and channel count a header may state for its duration to count. */
const MAX_SAMPLE_RATE = 384_000;
const MAX_CHANNELS = 64;

/**
 * The duration of a WAV file from its header, or undefined when `head` is not one or does not add
 * up: PCM or IEEE float; byteRate == sampleRate × blockAlign and blockAlign == channels ×
 * bitsPerSample / 8; the first data chunk running to the end of the file (`size`, the whole file's
 * bytes) within WAV_TRAILING_SLACK (a streamed WAV's length of 0 or 0xFFFFFFFF runs to its end).
 */
export function wavSeconds(head: Buffer, size: number): number | undefined {
  if (head.length < 12 || head.toString("latin1", 0, 4) !== "RIFF" || head.toString("latin1", 8, 12) !== "WAVE") return undefined;
  let byteRate: number | undefined;
  let at = 12;
  while (at + 8 <= head.length) {
    const id = head.toString("latin1", at, at + 4);
    const length = head.readUInt32LE(at + 4);
    if (id === "fmt " && length >= 16 && at + 24 <= head.length) {
      const format = head.readUInt16LE(at + 8);
      const channels = head.readUInt16LE(at + 10);
      const sampleRate = head.readUInt32LE(at + 12);
      const rate = head.readUInt32LE(at + 16);
      const blockAlign = head.readUInt16LE(at + 20);
      const bits = head.readUInt16LE(at + 22);
      const consistent =
        WAV_FORMATS.has(format) &&
        channels >= 1 &&
        channels <= MAX_CHANNELS &&
        sampleRate >= 1 &&
        sampleRate <= MAX_SAMPLE_RATE &&
        bits >= 8 &&
        bits % 8 === 0 &&
        blockAlign === (channels * bits) / 8 &&
        rate === sampleRate * blockAlign;
      if (!consistent) return undefined;
      byteRate = rate;
    }
    if (id === "data") {
      if (!byteRate) return undefined;
      const data = size - (at + 8);
      // a streamed WAV's data length may be 0 or 0xFFFFFFFF; any other must reach (about) the end
      if (length !== 0 && length !== 0xffffffff && length + WAV_TRAILING_SLACK < data) return undefined;
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
 * (plus a second) when the header adds up, never more than its size allows at MIN_BITRATE_BPS.
 * Read without blocking the event loop.
 */
export async function audioSecondsBound(path: string, size: number): Promise<number> {
  const bySize = sizeBoundSeconds(size);
  let head: Buffer;
  try {
    const file = await open(path, "r");
    try {
      const buffer = Buffer.alloc(Math.min(HEADER_BYTES, size));
      const { bytesRead } = await file.read(buffer, 0, buffer.length, 0);
      head = buffer.subarray(0, bytesRead);
    } finally {
      await file.close();
    }
  } catch {
    return bySize;
  }
  const wav = wavSeconds(head, size);
  return wav === undefined ? bySize : Math.min(bySize, Math.ceil(wav) + WAV_MARGIN_SECONDS);
}

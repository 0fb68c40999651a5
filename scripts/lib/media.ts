/** Pieces the benchmarks, the soak and the tests share: sizes, a process's resident memory, a WAV header, audio made by ffmpeg. */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { ffmpegPath } from "../../agent/asr/ffmpeg.js";

export const MB = 1024 ** 2;

/** `512mb` or `1gb` in bytes. */
export function parseSize(s: string): number {
  const m = /^(\d+)(mb|gb)$/i.exec(s);
  if (!m) throw new Error(`--size: expected like 512mb or 1gb, got "${s}"`);
  return Number(m[1]) * (m[2]!.toLowerCase() === "gb" ? 1024 ** 3 : MB);
}

/** The resident memory (VmRSS) of process `pid`, in bytes. */
export function rss(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb) * 1024;
}

/** A 16-bit PCM WAV header for `dataBytes` of samples (`rate` Hz, `channels`); default 16 kHz mono. */
export function wavHeader(dataBytes: number, rate = 16_000, channels = 1): Buffer {
  const h = Buffer.alloc(44);
  h.write("RIFF", 0);
  h.writeUInt32LE(Math.min(0xffffffff, dataBytes + 36), 4);
  h.write("WAVE", 8);
  h.write("fmt ", 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * channels * 2, 28);
  h.writeUInt16LE(channels * 2, 32);
  h.writeUInt16LE(16, 34);
  h.write("data", 36);
  h.writeUInt32LE(Math.min(0xffffffff, dataBytes), 40);
  return h;
}

/** A whole 16 kHz 16-bit mono PCM WAV file of `seconds` of silence. */
export function wavFile(seconds: number): Buffer {
  const dataBytes = seconds * 32_000;
  return Buffer.concat([wavHeader(dataBytes), Buffer.alloc(dataBytes)]);
}

/** 1 s of silence then 2 s of a 440 Hz tone, repeated: speech for the energy VAD, with pauses (an ffmpeg lavfi source). */
export const toneBursts = (seconds: number): string => `aevalsrc=0.4*sin(2*PI*440*t)*gt(mod(t\\,3)\\,1):s=16000:d=${seconds}`;

/** Two "speakers": a 220 Hz voice for 3 s, a pause, a 1500 Hz voice for 3 s, a pause; repeated (an ffmpeg lavfi source). */
export const twoVoices = (seconds: number): string =>
  `aevalsrc=0.3*sin(2*PI*220*t)*lt(mod(t\\,8)\\,3)+0.3*sin(2*PI*1500*t)*gt(mod(t\\,8)\\,4)*lt(mod(t\\,8)\\,7):s=16000:d=${seconds}`;

/** Writes `file` (its format from its extension) from an ffmpeg lavfi audio `source`. */
export function makeAudio(file: string, source: string): string {
  execFileSync(ffmpegPath(), ["-v", "error", "-y", "-f", "lavfi", "-i", source, file]);
  return file;
}

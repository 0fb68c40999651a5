/**
 * Probing and decoding with ffmpeg: the system `ffmpeg` when it is on the PATH (Debian's is
 * newer), else the static build shipped by `@ffmpeg-installer/ffmpeg`. Every input is decoded to
 * 16 kHz mono 32-bit float PCM in a file on disk, so a 4-hour upload never sits in memory.
 */
import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { stat } from "node:fs/promises";
import { AudioError, EngineError } from "./errors.js";

export const SAMPLE_RATE = 16_000;
const require = createRequire(import.meta.url);

let cached: string | undefined;

/** The ffmpeg binary to run: `KILN_FFMPEG`, else the PATH's, else the npm-shipped one. */
export function ffmpegPath(): string {
  if (cached) return cached;
  const fromEnv = process.env.KILN_FFMPEG;
  if (fromEnv) return (cached = fromEnv);
  if (spawnSync("ffmpeg", ["-version"], { stdio: "ignore" }).status === 0) return (cached = "ffmpeg");
  try {
    return (cached = (require("@ffmpeg-installer/ffmpeg") as { path: string }).path);
  } catch (err) {
    throw new EngineError("no ffmpeg found: install it (apt-get install ffmpeg) or set KILN_FFMPEG", { cause: err });
  }
}

export interface AudioProbe {
  /** Duration of the container in seconds, when it declares one. */
  durationSeconds?: number;
  /** The first audio stream's codec, e.g. "mp3", "pcm_s16le". */
  codec: string;
  /** The container format ffmpeg recognised (e.g. "wav", "mov,mp4,m4a,3gp,3g2,mj2"). */
  container: string;
}

function run(args: string[], signal?: AbortSignal): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(ffmpegPath(), args, { stdio: ["ignore", "ignore", "pipe"], signal });
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d: string) => {
      if (stderr.length < 65_536) stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

/** The last meaningful line ffmpeg printed, for error messages. */
function lastLine(stderr: string): string {
  return stderr.trim().split("\n").map((l) => l.trim()).filter(Boolean).pop() ?? "";
}

/**
 * Reads the container header: is this media, does it have an audio track, how long is it.
 * Throws `AudioError` for empty files, non-media and media without audio.
 */
export async function probeAudio(file: string, displayName: string): Promise<AudioProbe> {
  const { size } = await stat(file);
  if (size === 0) throw new AudioError(`${displayName} is empty (0 bytes)`);
  const { stderr } = await run(["-hide_banner", "-nostdin", "-i", file]);
  const input = /^Input #0, ([^,\n]+(?:,[^,\n]+)*?), from /m.exec(stderr);
  if (!input) {
    const reason = /Invalid data found|could not find codec parameters|Invalid argument/i.test(stderr)
      ? "is not an audio or video file ffmpeg can read"
      : `could not be read (${lastLine(stderr)})`;
    throw new AudioError(`${displayName} ${reason}`);
  }
  const audio = /Stream #0:\d+[^:]*: Audio: ([\w-]+)/.exec(stderr);
  if (!audio) throw new AudioError(`${displayName} has no audio track`);
  const d = /Duration: (\d+):(\d{2}):(\d{2}(?:\.\d+)?)/.exec(stderr);
  const durationSeconds = d ? Number(d[1]) * 3600 + Number(d[2]) * 60 + Number(d[3]) : undefined;
  return { codec: audio[1]!, container: input[1]!, ...(durationSeconds !== undefined ? { durationSeconds } : {}) };
}

/**
 * Decodes the first audio track to 16 kHz mono f32le in `out`, stopping at `maxSeconds`
 * (a longer track is an `AudioError`, checked from the decoded length when the header had none).
 * Returns the number of samples written.
 */
export async function decodeToPcm(file: string, out: string, options: { maxSeconds: number; displayName: string; signal?: AbortSignal }): Promise<number> {
  const args = ["-hide_banner", "-nostdin", "-loglevel", "error", "-y", "-i", file, "-map", "0:a:0", "-vn", "-ac", "1", "-ar", String(SAMPLE_RATE), "-t", String(options.maxSeconds + 1), "-f", "f32le", "-acodec", "pcm_f32le", out];
  const { code, stderr } = await run(args, options.signal);
  if (code !== 0) throw new AudioError(`${options.displayName} could not be decoded (${lastLine(stderr) || `ffmpeg exited with ${code}`})`);
  const samples = (await stat(out)).size / 4;
  if (samples === 0) throw new AudioError(`${options.displayName} has an audio track with no samples`);
  if (samples > options.maxSeconds * SAMPLE_RATE) throw new AudioError(`${options.displayName} runs over the ${formatLimit(options.maxSeconds)} limit`);
  return samples;
}

function formatLimit(seconds: number): string {
  return seconds % 3600 === 0 ? `${seconds / 3600}-hour` : `${seconds}-second`;
}

/**
 * Probing and decoding with ffmpeg: the system `ffmpeg` when it is on the PATH (Debian's is
 * newer), else the static build shipped by `@ffmpeg-installer/ffmpeg`. Every input is decoded to
 * 16 kHz mono 32-bit float PCM in a file on disk, so a 4-hour upload never sits in memory.
 *
 * ffmpeg reads only local files (`-protocol_whitelist file,pipe`) through the demuxers of the
 * accepted formats (`-format_whitelist`), so a crafted file cannot make it open a URL or parse an
 * exotic container. A watchdog kills it when it makes no progress (no output, no message) for
 * the stall time: an input that never delivers its bytes cannot hold a job slot forever.
 */
import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { stat } from "node:fs/promises";
import { childEnv } from "../../core/child.js";
import { AudioError, EngineError } from "./errors.js";

export const SAMPLE_RATE = 16_000;

/** The demuxers of the accepted formats: MP3, WAV, FLAC, M4A/MP4/MOV, AAC, OGG, WMA (ASF), AVI, WebM/MKV. */
export const ACCEPTED_DEMUXERS = ["mp3", "wav", "flac", "mov", "aac", "ogg", "asf", "avi", "matroska"] as const;
/** What every ffmpeg run is told before its input: local files only, accepted containers only. */
const INPUT_GUARD = ["-protocol_whitelist", "file,pipe", "-format_whitelist", ACCEPTED_DEMUXERS.join(",")];
/** Default stall time: ffmpeg is killed after this long without progress. */
export const DEFAULT_STALL_MS = 120_000;
const require = createRequire(import.meta.url);

let cached: string | undefined;

/** The ffmpeg binary to run: `KILN_FFMPEG`, else the PATH's, else the npm-shipped one. */
export function ffmpegPath(): string {
  if (cached) return cached;
  const fromEnv = process.env.KILN_FFMPEG;
  if (fromEnv) return (cached = fromEnv);
  if (spawnSync("ffmpeg", ["-version"], { stdio: "ignore", env: childEnv() }).status === 0) return (cached = "ffmpeg");
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

/** Options of one ffmpeg run. */
interface RunOptions {
  signal?: AbortSignal;
  /** Killed after this long with neither new output (`output`'s size) nor new messages. Default `DEFAULT_STALL_MS`. */
  stallMs?: number;
  /** The file ffmpeg writes, whose growth counts as progress. */
  output?: string;
  /** Told the output's size in bytes about every second while ffmpeg runs. */
  onOutput?: (bytes: number) => void;
}

function run(args: string[], options: RunOptions = {}): Promise<{ code: number | null; stderr: string; stalled: boolean }> {
  return new Promise((resolve, reject) => {
    // ffmpeg parses what strangers upload: it gets the engines' allow-listed environment, not the agent's secrets.
    const child = spawn(ffmpegPath(), args, { stdio: ["ignore", "ignore", "pipe"], env: childEnv(), ...(options.signal ? { signal: options.signal } : {}) });
    let stderr = "";
    let seen = 0; // stderr bytes and output bytes so far: progress is any growth
    let lastProgress = Date.now();
    let stalled = false;
    const stallMs = options.stallMs ?? DEFAULT_STALL_MS;
    const watchdog = setInterval(
      () => {
        void (async () => {
          const written = options.output
            ? await stat(options.output).then(
                (s) => s.size,
                () => 0,
              )
            : 0;
          if (written > 0) options.onOutput?.(written);
          const now = stderr.length + written;
          if (now > seen) {
            seen = now;
            lastProgress = Date.now();
          } else if (Date.now() - lastProgress >= stallMs && child.exitCode === null && !stalled) {
            stalled = true;
            child.kill("SIGKILL");
          }
        })();
      },
      Math.min(1000, Math.max(50, stallMs / 4)),
    );
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d: string) => {
      if (stderr.length < 65_536) stderr += d;
    });
    child.on("error", (err) => {
      clearInterval(watchdog);
      reject(err);
    });
    child.on("close", (code) => {
      clearInterval(watchdog);
      resolve({ code, stderr, stalled });
    });
  });
}

function stallError(displayName: string, stallMs: number | undefined): AudioError {
  return new AudioError(
    `${displayName} could not be read: ffmpeg made no progress for ${Math.round((stallMs ?? DEFAULT_STALL_MS) / 1000)} s and was stopped (is the file complete?)`,
  );
}

/**
 * The last meaningful line ffmpeg printed, for error messages, with the paths it names (this
 * machine's folders) replaced by the name the user knows.
 */
function lastLine(stderr: string, paths: readonly string[], displayName: string): string {
  let line =
    stderr
      .trim()
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .pop() ?? "";
  for (const p of paths) line = line.split(p).join(displayName);
  return line;
}

/**
 * Reads the container header: is this media, does it have an audio track, how long is it.
 * Throws `AudioError` for empty files, non-media and media without audio.
 */
export async function probeAudio(file: string, displayName: string, options: { stallMs?: number; signal?: AbortSignal } = {}): Promise<AudioProbe> {
  const { size } = await stat(file);
  if (size === 0) throw new AudioError(`${displayName} is empty (0 bytes)`);
  const { stderr, stalled } = await run(["-hide_banner", "-nostdin", ...INPUT_GUARD, "-i", file], options);
  if (stalled) throw stallError(displayName, options.stallMs);
  const input = /^Input #0, ([^,\n]+(?:,[^,\n]+)*?), from /m.exec(stderr);
  if (!input) {
    const reason = /Invalid data found|could not find codec parameters|Invalid argument/i.test(stderr)
      ? "is not an audio or video file ffmpeg can read"
      : `could not be read (${lastLine(stderr, [file], displayName)})`;
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
export async function decodeToPcm(
  file: string,
  out: string,
  options: { maxSeconds: number; displayName: string; signal?: AbortSignal; stallMs?: number; onOutput?: (bytes: number) => void },
): Promise<number> {
  const args = [
    "-hide_banner",
    "-nostdin",
    "-loglevel",
    "error",
    "-y",
    ...INPUT_GUARD,
    "-i",
    file,
    "-map",
    "0:a:0",
    "-vn",
    "-ac",
    "1",
    "-ar",
    String(SAMPLE_RATE),
    "-t",
    String(options.maxSeconds + 1),
    "-f",
    "f32le",
    "-acodec",
    "pcm_f32le",
    out,
  ];
  const { code, stderr, stalled } = await run(args, {
    output: out,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.stallMs !== undefined ? { stallMs: options.stallMs } : {}),
    ...(options.onOutput ? { onOutput: options.onOutput } : {}),
  });
  if (stalled) throw stallError(options.displayName, options.stallMs);
  if (code !== 0) throw new AudioError(`${options.displayName} could not be decoded (${lastLine(stderr, [file, out], options.displayName) || `ffmpeg exited with ${code}`})`);
  const samples = (await stat(out)).size / 4;
  if (samples === 0) throw new AudioError(`${options.displayName} has an audio track with no samples`);
  if (samples > options.maxSeconds * SAMPLE_RATE) throw new AudioError(`${options.displayName} runs over the ${formatLimit(options.maxSeconds)} limit`);
  return samples;
}

function formatLimit(seconds: number): string {
  return seconds % 3600 === 0 ? `${seconds / 3600}-hour` : `${seconds}-second`;
}

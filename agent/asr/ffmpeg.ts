/**
 * Probing and decoding with ffmpeg: `--ffmpeg` / `KILN_FFMPEG` when set, else the system `ffmpeg`
 * when it is on the PATH (Debian's is newer), else the static build shipped by
 * `@ffmpeg-installer/ffmpeg`. Every input is decoded to 16 kHz mono 32-bit float PCM in a file on
 * disk, so a 4-hour upload never sits in memory.
 *
 * ffmpeg reads only local files (`-protocol_whitelist file,pipe`) through the demuxers of the
 * accepted formats (`-format_whitelist`), so a crafted file cannot make it open a URL or parse an
 * exotic container. A watchdog kills it when it makes no progress (no output, no message) for
 * the stall time: an input that never delivers its bytes cannot hold a job slot forever.
 *
 * A failure is the file's (`AudioError`, "bad input") only when ffmpeg says so: it could not open
 * or parse the input, or the input has no audio. ffmpeg missing, crashing or refusing Kiln's own
 * arguments is the node's (`EngineError`). The agent runs the pipeline's probe and decode once at
 * start on a tiny generated WAV (`checkFfmpeg`), and reads ffmpeg's lists of demuxers, decoders,
 * muxers and encoders for every accepted format's; it refuses transcription when any fails (with
 * nothing configured, a failing PATH ffmpeg gives way to the npm-shipped build first).
 */
import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../../core/child.js";
import { AudioError, EngineError } from "./errors.js";

export const SAMPLE_RATE = 16_000;

/** The demuxers of the accepted formats: MP3, WAV, FLAC, M4A/MP4/MOV, AAC, OGG, WMA (ASF), AVI, WebM/MKV. */
export const ACCEPTED_DEMUXERS = ["mp3", "wav", "flac", "mov", "aac", "ogg", "asf", "avi", "matroska"] as const;
/** The formats each accepted demuxer reads, for the start check's refusals. */
const DEMUXER_FORMATS: Record<(typeof ACCEPTED_DEMUXERS)[number], string> = {
  mp3: "MP3",
  wav: "WAV",
  flac: "FLAC",
  mov: "M4A/MP4/MOV",
  aac: "AAC",
  ogg: "OGG",
  asf: "WMA",
  avi: "AVI",
  matroska: "WebM/MKV",
};
/**
 * The decoders of the accepted formats' usual codecs, each with the other decoders of the same
 * codec that do as well (a build may have only the float MP3 decoder, or libopus alone), and
 * the formats that need it, for the refusals.
 */
const NEEDED_DECODERS: readonly { name: string; any: readonly string[]; for: string }[] = [
  { name: "mp3", any: ["mp3float", "mp3", "mp3_at"], for: "MP3" },
  { name: "aac", any: ["aac", "aac_fixed", "libfdk_aac", "aac_at"], for: "M4A/AAC" },
  { name: "flac", any: ["flac"], for: "FLAC" },
  { name: "pcm_s16le", any: ["pcm_s16le"], for: "WAV" },
  { name: "vorbis", any: ["vorbis", "libvorbis"], for: "OGG/WebM" },
  { name: "opus", any: ["opus", "libopus"], for: "OGG/WebM" },
  { name: "wmav2", any: ["wmav2"], for: "WMA" },
];
/** What every ffmpeg run is told before its input: local files only, accepted containers only. */
const INPUT_GUARD = ["-protocol_whitelist", "file,pipe", "-format_whitelist", ACCEPTED_DEMUXERS.join(",")];
/** Default stall time: ffmpeg is killed after this long without progress. */
export const DEFAULT_STALL_MS = 120_000;
/** What the pipeline needs of ffmpeg, for the operator: said when the start check fails. */
export const FFMPEG_NEEDS =
  `ffmpeg ≥ 4.0 with -protocol_whitelist and -format_whitelist, the demuxers ${ACCEPTED_DEMUXERS.join(", ")}, the decoders ${NEEDED_DECODERS.map((d) => d.name).join(", ")}, ` +
  `resampling to ${SAMPLE_RATE} Hz mono and the f32le muxer with the pcm_f32le encoder; install Debian's ffmpeg (apt-get install ffmpeg) or set KILN_FFMPEG=/path (--ffmpeg)`;
const require = createRequire(import.meta.url);

/** The path set by the agent's `--ffmpeg` / `KILN_FFMPEG` (`useFfmpeg`). */
let configured: string | undefined;
/** The ffmpeg found without an override (the PATH's or the npm-shipped one), looked up once. */
let found: string | undefined;

/** Uses `path` as ffmpeg (the agent's `--ffmpeg`); `undefined` goes back to `KILN_FFMPEG` or the search (made again). */
export function useFfmpeg(path: string | undefined): void {
  configured = path;
  found = undefined;
}

/** The static build of `@ffmpeg-installer/ffmpeg`; throws when it is not installed. */
function bundledFfmpeg(): string {
  return (require("@ffmpeg-installer/ffmpeg") as { path: string }).path;
}

/** The ffmpeg binary to run: `--ffmpeg` / `KILN_FFMPEG`, else the PATH's, else the npm-shipped one. */
export function ffmpegPath(): string {
  const chosen = configured ?? process.env.KILN_FFMPEG;
  if (chosen) return chosen;
  return (found ??= findFfmpeg());
}

/** The PATH's `ffmpeg` when it runs, else the static build of `@ffmpeg-installer/ffmpeg`. */
function findFfmpeg(): string {
  if (spawnSync("ffmpeg", ["-version"], { stdio: "ignore", env: childEnv() }).status === 0) return "ffmpeg";
  try {
    return bundledFfmpeg();
  } catch (err) {
    throw new EngineError(`no ffmpeg found: ${FFMPEG_NEEDS}`, { cause: err });
  }
}

/**
 * The outcome of `checkFfmpeg`: whether the pipeline's probe and decode run and every accepted
 * format's demuxer and decoder is there, with the ffmpeg that ran them. `instead`: the PATH's
 * ffmpeg, which failed the check before the npm-shipped one passed it (nothing was configured).
 */
export type FfmpegCheck =
  { ok: true; path: string; version: string; instead?: { path: string; reason: string } } | { ok: false; path: string | undefined; version: string | undefined; reason: string };

/**
 * Checks the ffmpeg the pipeline will run (`checkOne`). With nothing configured (no `--ffmpeg`,
 * no `KILN_FFMPEG`) and the PATH's ffmpeg failing, the npm-shipped build is checked once too
 * and, when it passes, used from then on (`instead` says why).
 */
export async function checkFfmpeg(options: { stallMs?: number } = {}): Promise<FfmpegCheck> {
  const first = await checkOne(options);
  if (first.ok || (configured ?? process.env.KILN_FFMPEG) || first.path !== "ffmpeg") return first;
  let bundled: string;
  try {
    bundled = bundledFfmpeg();
  } catch {
    return first;
  }
  found = bundled;
  const second = await checkOne(options);
  if (second.ok) return { ...second, instead: { path: first.path, reason: first.reason } };
  found = first.path; // neither passes: the refusal names the PATH's, the one an operator would fix
  return { ...first, reason: `${first.reason}; the npm-shipped ${bundled} failed too (${second.reason})` };
}

/**
 * Runs the pipeline's own probe and decode (the same arguments, filters and watchdog) once on a
 * tiny generated WAV (8 kHz stereo, so resampling and downmixing run), and checks the samples
 * that come out; then reads ffmpeg's lists for every accepted format's demuxer and decoder and
 * the f32le muxer and pcm_f32le encoder (a build without the mp3 demuxer passes the WAV, then
 * fails every MP3). A failure is the ffmpeg's, never a file's: the agent refuses transcription.
 */
async function checkOne(options: { stallMs?: number }): Promise<FfmpegCheck> {
  let path: string | undefined;
  let version: string | undefined;
  const dir = await mkdtemp(join(tmpdir(), "kiln-ffmpeg-check-"));
  try {
    path = ffmpegPath();
    const ran = spawnSync(path, ["-hide_banner", "-version"], { encoding: "utf8", env: childEnv(), timeout: 30_000 });
    version = /^ffmpeg version (\S+)/m.exec(ran.stdout ?? "")?.[1];
    const input = join(dir, "check.wav");
    const seconds = 0.25;
    await writeFile(input, toneWav(8000, 2, seconds));
    const stallMs = options.stallMs ?? 30_000;
    const probe = await probeAudio(input, "the start check's WAV", { stallMs });
    if (probe.codec !== "pcm_s16le") throw new EngineError(`ffmpeg read the start check's WAV as ${probe.codec}, not pcm_s16le`);
    const samples = await decodeToPcm(input, join(dir, "check.f32"), { maxSeconds: 60, displayName: "the start check's WAV", stallMs });
    if (samples !== seconds * SAMPLE_RATE) throw new EngineError(`ffmpeg decoded ${samples} samples of a ${seconds} s WAV, not ${seconds * SAMPLE_RATE}`);
    checkComponents(path);
    return { ok: true, path, version: version ?? "unknown" };
  } catch (err) {
    return { ok: false, path, version, reason: err instanceof Error ? err.message : String(err) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Throws an `EngineError` naming every accepted format's demuxer or decoder, and the output's muxer or encoder, that `path` lacks. */
function checkComponents(path: string): void {
  const demuxers = listed(path, "demuxers");
  const decoders = listed(path, "decoders");
  const muxers = listed(path, "muxers");
  const encoders = listed(path, "encoders");
  const missing = [
    ...ACCEPTED_DEMUXERS.filter((d) => !demuxers.has(d)).map((d) => `the ${d} demuxer (${DEMUXER_FORMATS[d]})`),
    ...NEEDED_DECODERS.filter((d) => !d.any.some((n) => decoders.has(n))).map((d) => `the ${d.name} decoder (${d.for})`),
    ...(muxers.has("f32le") ? [] : ["the f32le muxer (the decode's output)"]),
    ...(encoders.has("pcm_f32le") ? [] : ["the pcm_f32le encoder (the decode's output)"]),
  ];
  if (missing.length > 0) throw new EngineError(`this ffmpeg lacks ${missing.join(", ")}: uploads in those formats would fail here`);
}

/**
 * The names in `ffmpeg -hide_banner -<list>`: for demuxers and muxers the lines after `--`
 * (` D  mov,mp4,m4a,3gp,3g2,mj2 QuickTime / MOV`; ffmpeg 6.1+ adds a `d` column for devices),
 * for decoders and encoders those after `------` (` A....D mp3float  MP3 …`).
 */
function listed(path: string, list: "demuxers" | "decoders" | "muxers" | "encoders"): Set<string> {
  const ran = spawnSync(path, ["-hide_banner", `-${list}`], { encoding: "utf8", env: childEnv(), timeout: 30_000, maxBuffer: 16 * 1024 * 1024 });
  const lines = (ran.stdout ?? "").split("\n");
  const start = lines.findIndex((l) => /^\s*-{2,}\s*$/.test(l));
  if (ran.status !== 0 || start < 0) {
    const why = ran.error ? ((ran.error as NodeJS.ErrnoException).code ?? ran.error.message) : lastLine(ran.stderr ?? "", [], "") || `exit status ${ran.status ?? ran.signal}`;
    throw new EngineError(`ffmpeg could not list its ${list} (${why})`);
  }
  const names = new Set<string>();
  for (const line of lines.slice(start + 1)) {
    const words = line.trim().split(/\s+/);
    const name = words[1] === "d" ? words[2] : words[1]; // a device's line: ` D d alsa`
    for (const n of name?.split(",") ?? []) if (n) names.add(n);
  }
  return names;
}

/** A 16-bit PCM WAV of a 440 Hz tone. */
function toneWav(rate: number, channels: number, seconds: number): Buffer {
  const frames = Math.round(rate * seconds);
  const data = frames * channels * 2;
  const wav = Buffer.alloc(44 + data);
  wav.write("RIFF", 0, "ascii");
  wav.writeUInt32LE(36 + data, 4);
  wav.write("WAVEfmt ", 8, "ascii");
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(channels, 22);
  wav.writeUInt32LE(rate, 24);
  wav.writeUInt32LE(rate * channels * 2, 28);
  wav.writeUInt16LE(channels * 2, 32);
  wav.writeUInt16LE(16, 34);
  wav.write("data", 36, "ascii");
  wav.writeUInt32LE(data, 40);
  for (let i = 0; i < frames; i++) {
    const v = Math.round(Math.sin((2 * Math.PI * 440 * i) / rate) * 8000);
    for (let c = 0; c < channels; c++) wav.writeInt16LE(v, 44 + (i * channels + c) * 2);
  }
  return wav;
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

/** How one ffmpeg run ended: its exit code, or the signal that ended it; its messages; whether the watchdog stopped it. */
interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  stalled: boolean;
}

/** Runs ffmpeg. It not starting at all (missing, not executable) is an `EngineError`; a stop by `options.signal` rejects with the AbortError. */
function run(args: string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    // ffmpeg parses what strangers upload: it gets the engines' allow-listed environment, not the agent's secrets.
    const path = ffmpegPath();
    const child = spawn(path, args, { stdio: ["ignore", "ignore", "pipe"], env: childEnv(), ...(options.signal ? { signal: options.signal } : {}) });
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
      if (options.signal?.aborted) reject(err);
      else reject(new EngineError(`ffmpeg could not be started on this node (${(err as NodeJS.ErrnoException).code ?? err.message}); the file may be fine`, { cause: err }));
    });
    child.on("close", (code, signal) => {
      clearInterval(watchdog);
      resolve({ code, signal, stderr, stalled });
    });
  });
}

function stallError(displayName: string, stallMs: number | undefined): AudioError {
  return new AudioError(
    `${displayName} could not be read: ffmpeg made no progress for ${Math.round((stallMs ?? DEFAULT_STALL_MS) / 1000)} s and was stopped (is the file complete?)`,
  );
}

/** ffmpeg's messages that it was run wrongly or cannot do what it is asked (an option, filter, muxer or encoder it lacks): the node's fault, whatever the input. */
const TOOL_FAULT =
  /Error splitting the argument list|Unrecognized option|Option not found|Missing argument for option|Failed to set value|Error parsing options|No such filter|Unknown (?:encoder|decoder|format)|Error initializing (?:filter|output)|not a suitable output format|Unable to (?:find|choose) a suitable output format|Error opening output|Could not write header|Encoder not found/i;
/** ffmpeg's messages that blame the input: not media it can read, a container not accepted, no audio stream. */
const INPUT_FAULT = /Invalid data found when processing input|could not find codec parameters|not on whitelist|matches no streams|does not contain any stream|moov atom not found/i;
/** The system's reasons an input could not be opened that are this machine's, not the file's. */
const MACHINE_FAULT = /No such file or directory|Permission denied|Too many open files|Cannot allocate memory|No space left on device|Input\/output error/i;

/**
 * Whose fault a failed ffmpeg run is: the input's when ffmpeg blames it (`INPUT_FAULT`, or its line
 * `<input>: <reason>` for an input it could not open, unless the reason is this machine's), else
 * ffmpeg's own (a crash, an option it lacks, an output it cannot write, anything unexplained).
 */
function blamesInput(result: RunResult, input: string): boolean {
  if (result.code === null || TOOL_FAULT.test(result.stderr)) return false;
  if (INPUT_FAULT.test(result.stderr)) return true;
  const opened = result.stderr.split("\n").find((l) => l.startsWith(`${input}: `));
  return opened !== undefined && !MACHINE_FAULT.test(opened);
}

/** ffmpeg failed in a way that is not the input's: an `EngineError` that says the file may be fine (no path of this machine in it). */
function toolError(result: RunResult, what: string, paths: readonly string[], displayName: string): EngineError {
  const how = result.code === null ? `was killed by ${result.signal ?? "a signal"}` : `failed (${lastLine(result.stderr, paths, displayName) || `exit status ${result.code}`})`;
  return new EngineError(`ffmpeg ${how} while ${what}: this node's ffmpeg could not run Kiln's decode; the file may be fine`);
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
  const result = await run(["-hide_banner", "-nostdin", ...INPUT_GUARD, "-i", file], options);
  const { stderr, stalled } = result;
  if (stalled) throw stallError(displayName, options.stallMs);
  const input = /^Input #0, ([^,\n]+(?:,[^,\n]+)*?), from /m.exec(stderr);
  if (!input) {
    if (!blamesInput(result, file)) throw toolError(result, `reading ${displayName}`, [file], displayName);
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
  const result = await run(args, {
    output: out,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.stallMs !== undefined ? { stallMs: options.stallMs } : {}),
    ...(options.onOutput ? { onOutput: options.onOutput } : {}),
  });
  if (result.stalled) throw stallError(options.displayName, options.stallMs);
  if (result.code !== 0) {
    if (!blamesInput(result, file)) throw toolError(result, `decoding ${options.displayName}`, [file, out], options.displayName);
    throw new AudioError(`${options.displayName} could not be decoded (${lastLine(result.stderr, [file, out], options.displayName) || `ffmpeg exited with ${result.code}`})`);
  }
  const samples = (await stat(out)).size / 4;
  if (samples === 0) throw new AudioError(`${options.displayName} has an audio track with no samples`);
  if (samples > options.maxSeconds * SAMPLE_RATE) throw new AudioError(`${options.displayName} runs over the ${formatLimit(options.maxSeconds)} limit`);
  return samples;
}

function formatLimit(seconds: number): string {
  return seconds % 3600 === 0 ? `${seconds / 3600}-hour` : `${seconds}-second`;
}

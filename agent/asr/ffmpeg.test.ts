/**
 * ffmpeg's watchdog and input guard, on the real binary (the one the agent would find: the PATH's,
 * else the npm-shipped build); the start check; and whose fault a failed run is.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AudioError, EngineError } from "./errors.js";
import { checkFfmpeg, decodeToPcm, ffmpegPath, probeAudio, useFfmpeg } from "./ffmpeg.js";

const dir = mkdtempSync(join(tmpdir(), "kiln-ffmpeg-"));
/** The ffmpeg the agent finds without an override: the PATH's, else the npm-shipped build. */
const ffmpeg = ffmpegPath();
// Every ffmpeg these tests run goes through a wrapper that records the environment it was given.
const envDump = join(dir, "ffmpeg.env");
const wrapper = join(dir, "ffmpeg-wrapper.sh");
writeFileSync(wrapper, `#!/bin/sh\nenv > '${envDump}'\nexec '${ffmpeg}' "$@"\n`, { mode: 0o755 });
process.env.KILN_FFMPEG = wrapper;

/** A script for ffmpeg that prints `stderr` and exits with `code` (or kills itself with `signal`) for every run but `-version`. */
function fakeFfmpeg(name: string, behaviour: { stderr: string; code?: number; signal?: string }): string {
  const script = join(dir, name);
  const end = behaviour.signal ? `kill -${behaviour.signal} $$` : `exit ${behaviour.code ?? 1}`;
  writeFileSync(
    script,
    `#!/bin/sh\ncase "$*" in\n  *-version*) echo 'ffmpeg version N-47683-g0e8eb07980-static'; exit 0 ;;\nesac\nprintf '%s\\n' '${behaviour.stderr}' >&2\n${end}\n`,
    {
      mode: 0o755,
    },
  );
  return script;
}
/** How a build without an option Kiln passes fails: the npm-shipped 2018 build, given `-readrate`. */
const lacksAnOption = () => fakeFfmpeg("ffmpeg-2018", { stderr: "Unrecognized option 'readrate'.\nError splitting the argument list: Option not found" });

afterEach(() => useFfmpeg(undefined));
process.env.KILN_AGENT_TOKEN = "an-agent-token-ffmpeg-must-not-see";

describe("ffmpeg", () => {
  it("kills a decode that makes no progress for the stall time (a FIFO nobody writes) and says why", async () => {
    const fifo = join(dir, "stalled.wav");
    execFileSync("mkfifo", [fifo]);
    const out = join(dir, "stalled.f32");
    const failure = await decodeToPcm(fifo, out, { maxSeconds: 60, displayName: "stalled.wav", stallMs: 1000 }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(AudioError);
    expect((failure as Error).message).toBe("stalled.wav could not be read: ffmpeg made no progress for 1 s and was stopped (is the file complete?)");
  });

  it("decodes a whole file under the same watchdog", async () => {
    const wav = join(dir, "tone.wav");
    execFileSync(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=3", wav]);
    expect(await decodeToPcm(wav, join(dir, "tone.f32"), { maxSeconds: 60, displayName: "tone.wav", stallMs: 1000 })).toBe(48_000);
    expect(await probeAudio(wav, "tone.wav", { stallMs: 1000 })).toMatchObject({ codec: "pcm_s16le", container: "wav" });
  });

  it("runs ffmpeg (which parses what strangers upload) without the agent's secrets in its environment", async () => {
    const wav = join(dir, "env.wav");
    execFileSync(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=1", wav]);
    rmSync(envDump, { force: true });
    await probeAudio(wav, "env.wav");
    const env = readFileSync(envDump, "utf8");
    expect(env).toMatch(/^PATH=/m);
    expect(env).not.toMatch(/KILN_AGENT_TOKEN|an-agent-token-ffmpeg-must-not-see/);
  });

  it("reads no container outside the accepted ones: a concat list naming a file beside it (which ffmpeg's safe mode allows)", async () => {
    const list = join(dir, "list.wav");
    writeFileSync(list, "ffconcat version 1.0\nfile tone.wav\n"); // relative: only the demuxer whitelist refuses it
    await expect(probeAudio(list, "list.wav")).rejects.toThrow(/^list\.wav (is not an audio or video file ffmpeg can read|could not be read)/);
  });
});

describe("the start check", () => {
  it("passes on the ffmpeg the agent finds, and on the npm-shipped build (a 2018 static build), which run the pipeline's probe and decode", async () => {
    expect(await checkFfmpeg()).toMatchObject({ ok: true });
    useFfmpeg((createRequire(import.meta.url)("@ffmpeg-installer/ffmpeg") as { path: string }).path);
    expect(await checkFfmpeg()).toMatchObject({ ok: true });
  });

  it("fails naming the demuxer when ffmpeg's list lacks one of the accepted formats' (an ffmpeg that decodes WAV but not MP3)", async () => {
    // the real ffmpeg, but its -demuxers list without mp3: as a build configured without it would answer
    const noMp3 = join(dir, "ffmpeg-no-mp3");
    writeFileSync(noMp3, `#!/bin/sh\ncase "$*" in\n  *-demuxers*) '${ffmpeg}' "$@" | grep -v -E '^ D.? +mp3 '; exit 0 ;;\nesac\nexec '${ffmpeg}' "$@"\n`, { mode: 0o755 });
    expect(execFileSync(noMp3, ["-hide_banner", "-demuxers"], { encoding: "utf8" })).toMatch(/^ D.? +wav /m); // the rest of the list is there
    useFfmpeg(noMp3);
    const check = await checkFfmpeg();
    expect(check).toMatchObject({ ok: false, path: noMp3 });
    expect(!check.ok && check.reason).toBe("this ffmpeg lacks the mp3 demuxer (MP3): uploads in those formats would fail here");
    // and a decoder: the list without either MP3 decoder nor AAC's
    const noDecoders = join(dir, "ffmpeg-no-decoders");
    writeFileSync(noDecoders, `#!/bin/sh\ncase "$*" in\n  *-decoders*) '${ffmpeg}' "$@" | grep -v -E ' (mp3float|mp3|aac|aac_fixed) '; exit 0 ;;\nesac\nexec '${ffmpeg}' "$@"\n`, {
      mode: 0o755,
    });
    useFfmpeg(noDecoders);
    expect(await checkFfmpeg()).toMatchObject({
      ok: false,
      reason: "this ffmpeg lacks the mp3 decoder (MP3), the aac decoder (M4A/AAC): uploads in those formats would fail here",
    });
  });

  it("with nothing configured, falls back to the npm-shipped build when the PATH's ffmpeg fails the check", async () => {
    const bin = join(dir, "bin");
    mkdirSync(bin, { recursive: true });
    // answers -version (so the search takes it), refuses Kiln's arguments
    writeFileSync(join(bin, "ffmpeg"), readFileSync(lacksAnOption()), { mode: 0o755 });
    const saved = { PATH: process.env.PATH, KILN_FFMPEG: process.env.KILN_FFMPEG };
    process.env.PATH = `${bin}:${saved.PATH}`;
    delete process.env.KILN_FFMPEG;
    try {
      useFfmpeg(undefined);
      const bundled = (createRequire(import.meta.url)("@ffmpeg-installer/ffmpeg") as { path: string }).path;
      const check = await checkFfmpeg();
      expect(check).toMatchObject({ ok: true, path: bundled, instead: { path: "ffmpeg", reason: expect.stringMatching(/^ffmpeg failed \(Error splitting the argument list/) } });
      expect(ffmpegPath()).toBe(bundled); // and the pipeline runs it from then on
      // configured, a failing ffmpeg is refused: the operator's choice is not second-guessed
      useFfmpeg(join(bin, "ffmpeg"));
      expect(await checkFfmpeg()).toMatchObject({ ok: false, path: join(bin, "ffmpeg") });
    } finally {
      process.env.PATH = saved.PATH;
      process.env.KILN_FFMPEG = saved.KILN_FFMPEG;
    }
  });

  it("fails, saying why, on an ffmpeg that refuses Kiln's arguments, on one that crashes, and on none", async () => {
    useFfmpeg(lacksAnOption());
    const refused = await checkFfmpeg();
    expect(refused).toMatchObject({ ok: false, version: "N-47683-g0e8eb07980-static" });
    expect(!refused.ok && refused.reason).toMatch(/^ffmpeg failed \(Error splitting the argument list: Option not found\) while reading the start check's WAV/);
    useFfmpeg(fakeFfmpeg("ffmpeg-crash", { stderr: "", signal: "SEGV" }));
    expect(await checkFfmpeg()).toMatchObject({ ok: false, reason: expect.stringMatching(/^ffmpeg was killed by SIGSEGV/) });
    useFfmpeg(join(dir, "no-such-ffmpeg"));
    expect(await checkFfmpeg()).toMatchObject({ ok: false, reason: expect.stringMatching(/^ffmpeg could not be started on this node \(ENOENT\)/) });
  });
});

describe("whose fault a failed ffmpeg run is", () => {
  const wav = join(dir, "fine.wav");
  const text = join(dir, "text.wav");

  it("ffmpeg refusing Kiln's arguments, crashing or missing is an engine fault, never the file's", async () => {
    execFileSync(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=1", wav]);
    const tools = [
      lacksAnOption(),
      fakeFfmpeg("ffmpeg-crash", { stderr: "", signal: "SEGV" }),
      fakeFfmpeg("ffmpeg-no-encoder", { stderr: "Unknown encoder 'pcm_f32le'" }),
      join(dir, "none"),
    ];
    for (const tool of tools) {
      useFfmpeg(tool);
      const probed = await probeAudio(wav, "talk.wav").catch((err: unknown) => err);
      expect(probed, tool).toBeInstanceOf(EngineError);
      expect((probed as Error).message).toMatch(/^ffmpeg .*; the file may be fine$/);
      const decoded = await decodeToPcm(wav, join(dir, "talk.f32"), { maxSeconds: 60, displayName: "talk.wav" }).catch((err: unknown) => err);
      expect(decoded, tool).toBeInstanceOf(EngineError);
      expect((decoded as Error).message).not.toContain(dir); // no path of this machine
    }
    // ffmpeg's output it cannot write is this machine's fault too
    useFfmpeg(undefined);
    const unwritable = await decodeToPcm(wav, join(dir, "no-such-folder", "talk.f32"), { maxSeconds: 60, displayName: "talk.wav" }).catch((err: unknown) => err);
    expect(unwritable).toBeInstanceOf(EngineError);
  });

  it("a file ffmpeg cannot read, or one with no audio, is the file's fault (bad input)", async () => {
    writeFileSync(text, "hello, not audio\n");
    await expect(probeAudio(text, "text.wav")).rejects.toThrow(new AudioError("text.wav is not an audio or video file ffmpeg can read"));
    const decoded = await decodeToPcm(text, join(dir, "text.f32"), { maxSeconds: 60, displayName: "text.wav" }).catch((err: unknown) => err);
    expect(decoded).toBeInstanceOf(AudioError);
    expect((decoded as Error).message).toBe("text.wav could not be decoded (text.wav: Invalid data found when processing input)");
    const video = join(dir, "silent.mkv");
    execFileSync(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=1", "-an", video]);
    await expect(probeAudio(video, "silent.mkv")).rejects.toThrow(new AudioError("silent.mkv has no audio track"));
    await expect(decodeToPcm(video, join(dir, "silent.f32"), { maxSeconds: 60, displayName: "silent.mkv" })).rejects.toBeInstanceOf(AudioError);
  });
});

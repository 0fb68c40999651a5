/** ffmpeg's watchdog and input guard, on the real binary. */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AudioError } from "./errors.js";
import { decodeToPcm, probeAudio } from "./ffmpeg.js";

const dir = mkdtempSync(join(tmpdir(), "kiln-ffmpeg-"));
// Every ffmpeg these tests run goes through a wrapper that records the environment it was given.
const envDump = join(dir, "ffmpeg.env");
const wrapper = join(dir, "ffmpeg-wrapper.sh");
writeFileSync(wrapper, `#!/bin/sh\nenv > '${envDump}'\nexec ffmpeg "$@"\n`, { mode: 0o755 });
process.env.KILN_FFMPEG = wrapper;
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
    execFileSync("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=3", wav]);
    expect(await decodeToPcm(wav, join(dir, "tone.f32"), { maxSeconds: 60, displayName: "tone.wav", stallMs: 1000 })).toBe(48_000);
    expect(await probeAudio(wav, "tone.wav", { stallMs: 1000 })).toMatchObject({ codec: "pcm_s16le", container: "wav" });
  });

  it("runs ffmpeg (which parses what strangers upload) without the agent's secrets in its environment", async () => {
    const wav = join(dir, "env.wav");
    execFileSync("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=1", wav]);
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

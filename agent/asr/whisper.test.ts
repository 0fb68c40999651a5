/** WhisperPool on Kiln's whisper addon with the fabricated tiny model, in real engine processes. */
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it, vi } from "vitest";
import { createLogger } from "../../core/log.js";
import { TEST_WHISPER_DIR } from "../../test/helpers/speech.js";
import { EngineError, JobAbortedError } from "./errors.js";
import { WhisperPool } from "./whisper.js";
import { WhisperEngine } from "./engine/whisper-engine.js";
import type { PrebuiltKind } from "../../core/prebuilt.js";

const tone = (seconds: number) => Float32Array.from({ length: seconds * 16_000 }, (_, i) => 0.4 * Math.sin((2 * Math.PI * 440 * i) / 16_000));
const logger = createLogger("test", "silent");
const params = { translate: false, language: "en" };

/** Whether `pid` runs (a zombie waiting for an absent reaper counts as gone). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw err;
  }
  const stat = `/proc/${pid}/stat`;
  return !existsSync(stat) || !/^\d+ \(.*\) Z/.test(readFileSync(stat, "utf8"));
}

describe("WhisperPool", () => {
  it("loads on first use, keeps models loaded, and unloads the least recently used idle one over the memory budget", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kiln-whisper-"));
    copyFileSync(join(TEST_WHISPER_DIR, "ggml-base.bin"), join(dir, "ggml-base.bin"));
    copyFileSync(join(TEST_WHISPER_DIR, "ggml-base.bin"), join(dir, "ggml-small.bin"));
    // One tiny model takes ~10 MiB of file + 64 MiB per parallel state: room for one, not two,
    // in the engine process that the one-off sessions of `pool.decode` share one after another.
    // no temperature fallback: the random-weight model would re-decode every window (this test is about loading)
    const pool = new WhisperPool({ dir, compute: "cpu", memoryBudgetMb: 120, parallel: 1, threads: 1, temperatureFallback: false, logger });
    try {
      const loaded = async () => (await pool.status()).filter((m) => m.loaded).map((m) => m.name);
      expect((await pool.status()).filter((m) => m.installed).map((m) => m.name)).toEqual(["base", "small"]);
      expect(await loaded()).toEqual([]);
      const segments = await pool.decode("base", tone(2), { translate: false, language: "en" });
      expect(Array.isArray(segments)).toBe(true);
      expect(await loaded()).toEqual(["base"]);
      await pool.decode("base", tone(1), { translate: false });
      expect(await loaded()).toEqual(["base"]);
      await pool.decode("small", tone(1), { translate: true });
      expect(await loaded()).toEqual(["small"]);
      await expect(pool.decode("medium", tone(1), { translate: false })).rejects.toThrow(/whisper model "medium" is not installed/);
      expect(pool.engines()).toHaveLength(1);
    } finally {
      await pool.dispose();
    }
  });

  it("fails only the decodes of a session whose engine process is killed, gives later sessions live engines, and leaves no process after dispose", async () => {
    // No temperature fallback: the random-weight model would re-decode every window.
    const pool = new WhisperPool({ dir: TEST_WHISPER_DIR, compute: "cpu", memoryBudgetMb: 1024, parallel: 2, threads: 1, temperatureFallback: false, logger });
    const pids = new Set<number>();
    try {
      const victim = pool.session("job-a");
      const bystander = pool.session("job-b");
      const [victimPid, bystanderPid] = [victim.pid!, bystander.pid!];
      expect(victimPid).not.toBe(bystanderPid);
      expect(pool.engines()).toEqual(
        expect.arrayContaining([
          { pid: victimPid, label: "job-a" },
          { pid: bystanderPid, label: "job-b" },
        ]),
      );

      const survived = bystander.decode("base", tone(3), params);
      // Killed once whisper runs on the 30 s tone, which takes far longer than the kill.
      const crashed = victim.decode("base", tone(30), params, undefined, { onStarted: () => process.kill(victimPid, "SIGKILL") });
      await expect(crashed).rejects.toThrow(EngineError);
      await expect(crashed).rejects.toThrow("the whisper engine process crashed (SIGKILL)");
      expect(Array.isArray(await survived)).toBe(true);
      await expect(victim.decode("base", tone(1), params)).rejects.toThrow("the whisper engine process crashed (SIGKILL)");
      expect(running(victimPid)).toBe(false);
      expect(pool.engines()).toEqual([{ pid: bystanderPid, label: "job-b" }]);

      await Promise.all([victim.close(), bystander.close()]);
      expect(pool.engines()).toEqual([{ pid: bystanderPid, label: null }]);
      // The next session takes the warm engine, the one after it a fresh process.
      const warm = pool.session("job-c");
      const fresh = pool.session("job-d");
      expect(warm.pid).toBe(bystanderPid);
      expect([victimPid, bystanderPid]).not.toContain(fresh.pid);
      for (const segments of await Promise.all([warm, fresh].map((s) => s.decode("base", tone(2), params)))) expect(Array.isArray(segments)).toBe(true);
      for (const e of pool.engines()) pids.add(e.pid);
      expect(pids.size).toBe(2);
      await Promise.all([warm.close(), fresh.close()]);
    } finally {
      await pool.dispose();
    }
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: "ESRCH" }));
    expect(pool.engines()).toEqual([]);
    expect(() => pool.session("late")).toThrow(/the agent stopped/);
  });

  it("ends busy engine processes at dispose, failing their decodes as aborted", async () => {
    const pool = new WhisperPool({ dir: TEST_WHISPER_DIR, compute: "cpu", memoryBudgetMb: 1024, parallel: 1, threads: 1, logger });
    const session = pool.session("job");
    let started!: () => void;
    const inFlight = new Promise<void>((resolve) => {
      started = resolve;
    });
    const decoding = session.decode("base", tone(30), params, undefined, { onStarted: started });
    decoding.catch(() => undefined);
    await inFlight;
    await pool.dispose();
    await expect(decoding).rejects.toThrow(JobAbortedError);
    expect(() => process.kill(session.pid!, 0)).toThrow(expect.objectContaining({ code: "ESRCH" }));
  });

  it("keeps one idle engine process warm and ends the extra idle ones after idleExitMs", async () => {
    const pool = new WhisperPool({ dir: TEST_WHISPER_DIR, compute: "cpu", memoryBudgetMb: 1024, parallel: 2, threads: 1, idleExitMs: 100, logger });
    try {
      const sessions = [pool.session("a"), pool.session("b"), pool.session("c")];
      expect(pool.engines()).toHaveLength(3);
      const retired = [sessions[0]!.pid, sessions[1]!.pid];
      await Promise.all(sessions.map((s) => s.close()));
      await vi.waitFor(() => expect(pool.engines()).toEqual([{ pid: sessions[2]!.pid, label: null }]), { timeout: 10_000, interval: 50 });
      for (const pid of retired) await vi.waitFor(() => expect(running(pid!)).toBe(false), { timeout: 10_000, interval: 50 });
    } finally {
      await pool.dispose();
    }
  });

  it("starts engine processes with no stdin and an environment without the agent's secrets", async () => {
    process.env.KILN_NODE_TOKEN = "engine-must-not-see-this";
    const pool = new WhisperPool({ dir: TEST_WHISPER_DIR, compute: "cpu", memoryBudgetMb: 1024, parallel: 1, threads: 1, logger });
    try {
      const { pid } = pool.session("env");
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter(Boolean);
      expect(environ.map((v) => v.split("=")[0])).toContain("PATH");
      expect(environ.join("\n")).not.toContain("KILN_NODE_TOKEN");
      expect(readlinkSync(`/proc/${pid}/fd/0`)).toBe("/dev/null");
    } finally {
      delete process.env.KILN_NODE_TOKEN;
      await pool.dispose();
    }
  });

  it("ends its engine processes when the agent's process dies", async () => {
    // A process that starts a long decode (ten whisper windows) on the compiled pool, says its
    // engine's pid once whisper runs, and waits to be killed.
    const script = `
      const { WhisperPool } = await import(${JSON.stringify(new URL("../../dist/agent/asr/whisper.js", import.meta.url).href)});
      const { createLogger } = await import(${JSON.stringify(new URL("../../dist/core/log.js", import.meta.url).href)});
      const pool = new WhisperPool({ dir: ${JSON.stringify(TEST_WHISPER_DIR)}, compute: "cpu", memoryBudgetMb: 1024, parallel: 1, threads: 1, logger: createLogger("test", "silent") });
      const session = pool.session("orphan");
      const pcm = Float32Array.from({ length: 300 * 16000 }, (_, i) => 0.4 * Math.sin((2 * Math.PI * 440 * i) / 16000));
      session.decode("base", pcm, { translate: false }, undefined, { onStarted: () => console.log(session.pid) }).catch(() => {});
      setInterval(() => {}, 1000);`;
    const agent = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: agent.stdout }).once("line", resolve);
      agent.once("exit", (code) => reject(new Error(`the agent process exited (${code})`)));
    });
    const enginePid = Number(line);
    expect(running(enginePid)).toBe(true);
    agent.kill("SIGKILL");
    await vi.waitFor(() => expect(running(enginePid)).toBe(false), { timeout: 10_000, interval: 50 });
  });
});

describe("WhisperEngine", () => {
  it("whose addon cannot load fails each decode with the reason, and the process lives on to be stopped", async () => {
    const settings = { memoryBudgetMb: 256, parallel: 1, threads: 1, temperatureFallback: false };
    const engine = new WhisperEngine(settings, { backend: "nonexistent" as PrebuiltKind, gpu: false }, logger, () => undefined);
    try {
      const decode = () => engine.decode("base", join(TEST_WHISPER_DIR, "ggml-base.bin"), tone(1), params);
      await expect(decode()).rejects.toThrow(new EngineError("Kiln's whisper addon is not built for node-llama-cpp's nonexistent binaries; run npm run build:whisper"));
      await expect(decode()).rejects.toThrow(/not built for node-llama-cpp's nonexistent binaries/);
      expect(engine.alive).toBe(true);
    } finally {
      await engine.stop(2000);
    }
  });
});

/**
 * docs/quickstart-fleet.md, run: its shell blocks, in order, in one bash on loopback. The two
 * machines are one folder here: the blocks that fetch from the internet or copy between machines
 * are left out (the folder holds the fabricated models and the files the copy would bring), the
 * scheduler is `127.0.0.1` (an address, as in most labs: its certificate names it as `IP:`), its
 * ports and the node's are free ones, and the chat model is the fabricated GGUF. Blocks that keep running go to the background, and the script waits for the line
 * that says each is up. Any command that fails fails the test.
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../scripts/lib/run.js";
import { TINY_MODEL, tempDir } from "./helpers/fleet.js";
import { TEST_VAD, TEST_WHISPER_DIR } from "./helpers/speech.js";

const DOC = "docs/quickstart-fleet.md";
/** Blocks the test leaves out, by what their first line says. */
const LEFT_OUT = /\((needs the internet|between the machines)\)/;
const KEEPS_RUNNING = /\(keeps running/;
/** The line each long-running command logs once it is up. */
const UP: [RegExp, string][] = [
  [/kiln\.js scheduler/, "scheduler listening"],
  [/kiln\.js agent/, "registered with the scheduler"],
];

/** The doc's shell blocks, in order. */
function blocks(): string[] {
  return [...readFileSync(DOC, "utf8").matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((m) => m[1]!);
}

describe("the fleet quick start (docs/quickstart-fleet.md)", () => {
  let group: number | undefined;
  afterAll(() => {
    if (group) process.kill(-group, "SIGTERM");
  });

  it("its commands, run in order on loopback, reach a first chat completion and a first transcription through the fleet", async () => {
    const dir = tempDir();
    symlinkSync(resolve("bin"), join(dir, "bin"));
    mkdirSync(join(dir, "models", "whisper"), { recursive: true });
    symlinkSync(join(TEST_WHISPER_DIR, "ggml-base.bin"), join(dir, "models", "whisper", "ggml-base.bin"));
    symlinkSync(TEST_VAD, join(dir, "models", "whisper", "silero_vad.onnx"));
    const [http, grpc, node] = [await freePort(), await freePort(), await freePort()];
    const loopback = (text: string) =>
      text
        .replaceAll("scheduler.example", "127.0.0.1") // an address, as two machines in a lab use: the certificate names it as IP:
        .replaceAll("0.0.0.0:8080", `127.0.0.1:${http}`)
        .replaceAll(":8080", `:${http}`)
        .replaceAll("0.0.0.0:50051", `127.0.0.1:${grpc}`)
        .replaceAll(":50051", `:${grpc}`)
        .replaceAll("--host 0.0.0.0 --port 7860", `--host 127.0.0.1 --port ${node} --threads 1`)
        .replace(/hf:[\w./-]+:Q4_K_M/, TINY_MODEL);

    const ran = blocks().filter((b) => !LEFT_OUT.test(b.split("\n")[0]!));
    expect(ran.length).toBeGreaterThanOrEqual(8);
    const script = ["set -euo pipefail"];
    ran.forEach((block, i) => {
      const text = loopback(block);
      if (!KEEPS_RUNNING.test(text.split("\n")[0]!)) return void script.push(text);
      const up = UP.find(([command]) => command.test(text));
      if (!up) throw new Error(`${DOC}: a block that keeps running, but no line says when it is up:\n${text}`);
      script.push(
        `{\n${text}\n} > up-${i}.log 2>&1 &`,
        `for _ in $(seq 600); do grep -q '${up[1]}' up-${i}.log && break; sleep 0.1; done; grep -q '${up[1]}' up-${i}.log || { cat up-${i}.log; exit 1; }`,
      );
    });
    writeFileSync(join(dir, "quickstart.sh"), script.join("\n"));

    const child = spawn("bash", ["quickstart.sh"], { cwd: dir, detached: true, env: { ...process.env, KILN_LOG_LEVEL: "info" }, stdio: ["ignore", "pipe", "pipe"] });
    group = child.pid;
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((r) => child.once("exit", r));
    expect(code, output.slice(-4000)).toBe(0);
    expect(output).toContain('"object":"chat.completion"');
    expect(output).toMatch(/"text":/);
  }, 240_000);
});

/**
 * The agent's memory during a large upload: `kiln agent` (transcription only, loopback) as a child
 * process, one upload of SIZE bytes streamed to `POST /api/process` as multipart, and the child's
 * resident memory (VmRSS) sampled every 20 ms. The baseline is the same process's RSS, idle,
 * just before the upload, in the same run. Target (issue 18): growth < 100 MB for a 1 GB upload.
 *
 *   npm run bench:upload-memory -- [--size 1gb] [--rate-mbps 0]   (rate 0: as fast as loopback goes)
 *
 * The bytes are zeros after a WAV header that declares them, for the fabricated whisper model: the
 * job afterwards fails (over the 4-hour limit) in a moment, which is not what is measured.
 */
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { MB, parseSize, rss, wavHeader } from "./lib/media.js";
import { argValue } from "./lib/cli.js";
import { ensureTestSpeechModels } from "../fabricate/index.js";

const size = parseSize(argValue(process.argv, "--size") ?? "1gb");
const rateMbps = Number(argValue(process.argv, "--rate-mbps") ?? "0");

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "kiln-bench-upload-"));
  const speech = await ensureTestSpeechModels();
  const child = spawn(
    process.execPath,
    [
      resolve("bin/kiln.js"),
      "agent",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--data-dir",
      dataDir,
      "--whisper-dir",
      speech.whisperDir,
      "--vad-model",
      speech.vadModel,
      "--max-upload",
      `${Math.ceil((size + MB) / MB)}mb`,
      "--log-level",
      "info",
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const port = await new Promise<number>((ok, fail) => {
    child.stdout!.setEncoding("utf8");
    let buffered = "";
    child.stdout!.on("data", (d: string) => {
      buffered += d;
      const m = /transcription API listening.*?"http":"[^"]*:(\d+)"|"http":"[^"]*:(\d+)".*?transcription API listening/.exec(buffered);
      if (m) ok(Number(m[1] ?? m[2]));
    });
    child.once("exit", (code) => fail(new Error(`kiln agent exited (${code})`)));
  });
  child.stdout!.resume();
  await new Promise((r) => setTimeout(r, 1000)); // let start-up allocations settle
  const baseline = rss(child.pid!);

  let peak = baseline;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rss(child.pid!));
  }, 20);
  const boundary = "kiln-bench-boundary";
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="audio"; filename="big.wav"\r\nContent-Type: audio/wav\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const header = wavHeader(size - 44);
  const started = performance.now();
  const status = await new Promise<number>((ok, fail) => {
    const req = request({
      host: "127.0.0.1",
      port,
      path: "/api/process",
      method: "POST",
      headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": head.length + size + tail.length },
    });
    req.on("response", (res) => {
      res.resume();
      ok(res.statusCode ?? 0);
    });
    req.on("error", fail);
    const chunk = Buffer.alloc(256 * 1024);
    let sent = 0;
    req.write(head);
    req.write(header);
    sent += header.length;
    const pump = (): void => {
      while (sent < size) {
        const n = Math.min(chunk.length, size - sent);
        sent += n;
        const more = req.write(n === chunk.length ? chunk : chunk.subarray(0, n));
        if (rateMbps > 0) {
          setTimeout(pump, (n / MB / rateMbps) * 1000);
          return;
        }
        if (!more) {
          req.once("drain", pump);
          return;
        }
      }
      req.end(tail);
    };
    pump();
  });
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
  rmSync(dataDir, { recursive: true, force: true });

  const growth = peak - baseline;
  console.log(
    JSON.stringify({
      bytes: size,
      status,
      seconds: Math.round(seconds * 10) / 10,
      mbPerSecond: Math.round(size / MB / seconds),
      baselineRssMb: Math.round(baseline / MB),
      peakRssMb: Math.round(peak / MB),
      growthMb: Math.round(growth / MB),
      targetMb: 100,
      growthOverTarget: Math.round((growth / MB / 100) * 100) / 100,
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});

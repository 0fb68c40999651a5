/**
 * Port 7860 against strangers (issue: "a GPU instance that strangers can reach"): the token rule
 * at start, the agent token and each job's handle, the job list, cancel and delete, the staging
 * budget and the per-address upload cap, the retention sweep, and ffmpeg kept to local files and
 * the accepted containers. A real agent (in this process or as `kiln agent`) with the real pipeline.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { createServer, request, type RequestOptions, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnKiln, tempDir, until } from "./helpers/fleet.js";
import { getJson, handleOf, makeMedia, QUICK_SPEECH_SECONDS, startTranscription, upload, waitForJob, type Transcription } from "./helpers/speech.js";

const TOKEN = "agent-token-for-tests-0123";
const operator = { authorization: `Bearer ${TOKEN}` };
let media: string;

beforeAll(() => {
  media = tempDir();
});

/** A request through node:http, which sends what fetch will not (any Host, a Content-Length the body does not reach). */
function rawRequest(port: number, options: RequestOptions, body = ""): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, ...options }, (res) => {
      let text = "";
      res
        .setEncoding("utf8")
        .on("data", (d: string) => (text += d))
        .on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("starting on a reachable address", () => {
  it("refuses a non-loopback --host without --agent-token, in one line naming the flag", async () => {
    const proc = spawnKiln(["agent", "--host", "0.0.0.0", "--port", "0"], { KILN_DATA_DIR: tempDir() });
    expect(await proc.exited).toBe(1);
    expect(proc.lines).toHaveLength(1);
    expect(proc.lines[0]).toMatch(/^kiln: --host \/ KILN_HOST: 0\.0\.0\.0 is reachable from other machines and no --agent-token is set: pass --agent-token/);
  });

  it("serves with --agent-insecure, warning at start; and `kiln dev` keeps its agent on loopback", async () => {
    const proc = spawnKiln(["agent", "--host", "0.0.0.0", "--port", "0", "--agent-insecure", "--log-level", "warn"], { KILN_DATA_DIR: tempDir() });
    try {
      const line = await proc.waitFor(/"--agent-insecure: the transcription API is served without a token/, 30_000);
      expect(JSON.parse(line)).toMatchObject({ level: 40, host: "0.0.0.0" });
    } finally {
      await proc.stop();
    }
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("KILN_")));
    const dev = JSON.parse(execFileSync(process.execPath, [resolve("bin/kiln.js"), "dev", "--print-config"], { env, encoding: "utf8" })) as { host: string };
    expect(dev.host).toBe("127.0.0.1");
  });
});

describe("with --agent-token", () => {
  let t: Transcription;
  beforeAll(async () => {
    t = await startTranscription({ agentToken: TOKEN, asrJobs: "1" });
  });
  afterAll(() => t?.agent.close());

  it("answers every /api route with 401 and the Error body when no token is sent", async () => {
    const id = "6f1c7a36-5d9e-4c55-9d7b-2f8a3a8b1e10";
    const routes: [string, string][] = [
      ["POST", "/api/process"],
      ["GET", `/api/status/${id}`],
      ["GET", `/api/result/${id}`],
      ["GET", "/api/jobs"],
      ["POST", `/api/jobs/${id}/cancel`],
      ["DELETE", `/api/jobs/${id}`],
      ["GET", `/api/jobs/${id}/events`],
      ["GET", "/api/models"],
      ["GET", "/api/node"],
    ];
    for (const [method, path] of routes) {
      const res = await fetch(`${t.base}${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(401);
      const body = (await res.json()) as { error: { type: string; message: string } };
      expect(body.error.type, `${method} ${path}`).toBe("authentication_error");
      expect(body.error.message, `${method} ${path}`).toMatch(/^Authorization:/);
    }
  });

  it("keeps /readyz and /metrics behind the token (401 without it or with another), /healthz open", async () => {
    for (const path of ["/readyz", "/metrics"]) {
      const bare = await fetch(`${t.base}${path}`);
      expect(bare.status, path).toBe(401);
      expect(((await bare.json()) as { error: { type: string; code: string; message: string } }).error, path).toMatchObject({
        type: "authentication_error",
        code: "missing_api_key",
        message: expect.stringMatching(/^Authorization:/),
      });
      const wrong = await fetch(`${t.base}${path}`, { headers: { authorization: "Bearer not-this-instances-token" } });
      expect(wrong.status, path).toBe(401);
      const text = await wrong.text();
      expect(text, path).toContain("invalid_api_key");
      expect(text, path).not.toContain("kiln_");
    }
    expect((await fetch(`${t.base}/readyz`, { headers: operator })).status).toBe(200);
    const metrics = await fetch(`${t.base}/metrics`, { headers: operator });
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain("kiln_asr_jobs");
    expect((await fetch(`${t.base}/healthz`)).status).toBe(200);
  });

  it("opens a job to the token or to its own handle, and to no other job's handle", async () => {
    const a = await upload(t.base, [makeMedia(media, "a.wav", { seconds: QUICK_SPEECH_SECONDS })], {}, operator);
    const b = await upload(t.base, [makeMedia(media, "b.wav", { seconds: QUICK_SPEECH_SECONDS })], {}, operator);
    expect([a.status, b.status]).toEqual([202, 202]);
    await waitForJob(t.base, a.body.job_id);
    await waitForJob(t.base, b.body.job_id);
    const result = (headers: Record<string, string>) => getJson(`${t.base}/api/result/${a.body.job_id}`, headers);
    expect((await result({ authorization: `Bearer ${a.body.handle}` })).status).toBe(200);
    expect((await result(operator)).status).toBe(200);
    const other = await result({ authorization: `Bearer ${b.body.handle}` });
    expect(other.status).toBe(401);
    expect(other.body.error).toMatchObject({ code: "invalid_job_handle" });
    expect((await result({ authorization: "Bearer not-a-handle" })).status).toBe(401);
    // The token's holder learns that an unknown id is unknown.
    expect((await getJson(`${t.base}/api/status/6f1c7a36-5d9e-4c55-9d7b-2f8a3a8b1e10`, operator)).body.error).toMatchObject({ code: "job_not_found" });
  });

  it("lists jobs newest first, in pages, without results or handles", async () => {
    for (const name of ["p1.wav", "p2.wav", "p3.wav"]) {
      expect((await upload(t.base, [makeMedia(media, name, { seconds: 1 })], {}, operator)).status).toBe(202);
    }
    const first = await getJson(`${t.base}/api/jobs?limit=2`, operator);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ object: "list", has_more: true });
    expect(first.body.data.map((j: { file_name: string }) => j.file_name)).toEqual(["p3.wav", "p2.wav"]);
    for (const job of first.body.data) {
      expect(Object.keys(job)).not.toContain("handle");
      expect(Object.keys(job)).not.toContain("result");
      expect(job.created_at).toBeGreaterThan(1.7e9);
    }
    const second = await getJson(`${t.base}/api/jobs?limit=2&after=${first.body.last_id}`, operator);
    expect(second.body.data.map((j: { file_name: string }) => j.file_name)[0]).toBe("p1.wav");
    const bad = await getJson(`${t.base}/api/jobs?limit=1000`, operator);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_limit", message: expect.stringMatching(/^limit:/) });
  });

  it("cancels a running job between chunks and a queued one at once; DELETE removes row and files", async () => {
    const long = await upload(t.base, [makeMedia(media, "long.wav", { seconds: 240 })], {}, operator);
    const queued = await upload(t.base, [makeMedia(media, "queued.wav", { seconds: 2 })], {}, operator);
    await until(async () => (await getJson(`${t.base}/api/status/${long.body.job_id}`, operator)).body.progress > 0.1, 60_000, "the long job to reach whisper");
    const inputOf = (id: string) => join(t.agent.jobs.uploadsDir, id, "input");
    expect(existsSync(inputOf(queued.body.job_id))).toBe(true);

    // the queued job's event stream, opened with its handle on this token-protected instance, hears the cancel
    const events = await fetch(`${t.base}/api/jobs/${queued.body.job_id}/events`, { headers: { authorization: `Bearer ${queued.body.handle}` } });
    expect(events.status).toBe(200);
    const q = await fetch(`${t.base}/api/jobs/${queued.body.job_id}/cancel`, { method: "POST", headers: { authorization: `Bearer ${queued.body.handle}` } });
    expect(q.status).toBe(200);
    const told = await events.text(); // the stream ends with done
    expect(told).toMatch(/event: done\ndata: \{"status":"cancelled"\}\n\n$/);
    expect(await q.json()).toMatchObject({ status: "cancelled" });
    expect(existsSync(inputOf(queued.body.job_id))).toBe(false);

    const r = await fetch(`${t.base}/api/jobs/${long.body.job_id}/cancel`, { method: "POST", headers: { authorization: `Bearer ${long.body.handle}` } });
    expect(r.status).toBe(200);
    const view = (await r.json()) as { status: string; progress: number };
    expect(view.status).toBe("cancelled");
    expect(view.progress).toBeLessThan(1);
    expect(existsSync(inputOf(long.body.job_id))).toBe(false);
    const again = await fetch(`${t.base}/api/jobs/${long.body.job_id}/cancel`, { method: "POST", headers: operator });
    expect(again.status).toBe(409);
    expect((await getJson(`${t.base}/api/result/${long.body.job_id}`, operator)).body.error).toMatchObject({ code: "job_cancelled" });

    const del = await fetch(`${t.base}/api/jobs/${long.body.job_id}`, { method: "DELETE", headers: { authorization: `Bearer ${long.body.handle}` } });
    expect(await del.json()).toEqual({ job_id: long.body.job_id, deleted: true });
    expect((await getJson(`${t.base}/api/status/${long.body.job_id}`, operator)).status).toBe(404);
    expect(existsSync(join(t.agent.jobs.uploadsDir, long.body.job_id))).toBe(false);
  }, 120_000);
});

describe("without a token (loopback)", () => {
  let t: Transcription;
  beforeAll(async () => {
    t = await startTranscription();
  });
  afterAll(() => t?.agent.close());

  it("reads a job only with its handle, and refuses the job list", async () => {
    const res = await upload(t.base, [makeMedia(media, "mine.wav", { seconds: QUICK_SPEECH_SECONDS })]);
    expect(res.status).toBe(202);
    await waitForJob(t.base, res.body.job_id);
    const bare = await fetch(`${t.base}/api/result/${res.body.job_id}`);
    expect(bare.status).toBe(401);
    expect(((await bare.json()) as { error: { code: string } }).error.code).toBe("missing_job_handle");
    expect((await getJson(`${t.base}/api/result/${res.body.job_id}`, { authorization: `Bearer ${handleOf(res.body.job_id)}` })).status).toBe(200);
    const list = await fetch(`${t.base}/api/jobs`);
    expect(list.status).toBe(403);
    expect(((await list.json()) as { error: { code: string } }).error.code).toBe("token_required");
  });

  it("serves /healthz, /readyz and /metrics without a token (there is none to ask for)", async () => {
    for (const path of ["/healthz", "/readyz", "/metrics"]) expect((await fetch(`${t.base}${path}`)).status, path).toBe(200);
  });

  it("answers only loopback Host names (a web page cannot reach it through DNS rebinding)", async () => {
    const port = Number(new URL(t.base).port);
    const get = (host: string) => rawRequest(port, { path: "/api/models", headers: { host } });
    const evil = await get("attacker.example:7860");
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body).error).toMatchObject({ type: "permission_error", code: "host_not_allowed", message: expect.stringMatching(/^Host:/) });
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) expect((await get(host)).status, host).toBe(200);
  });

  it("cancels a job that has only just started (probe or decode): cancelled, not an error", async () => {
    const res = await upload(t.base, [makeMedia(media, "early.wav", { seconds: 600 })]);
    const cancel = await fetch(`${t.base}/api/jobs/${res.body.job_id}/cancel`, { method: "POST", headers: { authorization: `Bearer ${res.body.handle}` } });
    expect(cancel.status).toBe(200);
    expect(await cancel.json()).toMatchObject({ status: "cancelled" });
    const { view } = await waitForJob(t.base, res.body.job_id);
    expect(view.status).toBe("cancelled");
    expect(view.error).toBeUndefined();
  });
});

describe("budgets", () => {
  it("11 parallel uploads against a small staging budget: the overflow gets 507, nothing of it is left on disk", async () => {
    // Each file is ~1 MB (32 s of 16 kHz 16-bit mono); the budget holds about three.
    const t = await startTranscription({ uploadBudget: "3mb", maxClientUploads: "20", asrJobs: "1" });
    try {
      const files = Array.from({ length: 11 }, (_, i) => makeMedia(media, `b${i}.wav`, { seconds: 32 }));
      const results = await Promise.all(files.map((f) => upload(t.base, [f])));
      const accepted = results.filter((r) => r.status === 202).map((r) => r.body.job_id as string);
      const refused = results.filter((r) => r.status === 507);
      expect(accepted.length + refused.length).toBe(11);
      expect(accepted.length).toBeGreaterThan(0);
      expect(refused.length).toBeGreaterThan(0);
      for (const r of refused)
        expect(r.body.error).toMatchObject({
          type: "service_unavailable_error",
          code: "insufficient_storage",
          message: expect.stringMatching(/^audio: .*staging budget \(3 MB\)/),
        });
      // Only accepted jobs own upload folders; the budget holds no byte of a refused one.
      for (const dir of readdirSync(t.agent.jobs.uploadsDir)) expect(accepted).toContain(dir);
      expect(t.agent.jobs.budget.usedBytes).toBeLessThanOrEqual(3 * 1024 ** 2);
      for (const id of accepted) expect((await waitForJob(t.base, id, 120_000)).view.status).toBe("completed");
      // a job is marked completed, then its upload removed and its bytes given back (in that order: a
      // crash between the two must find the input still there to resume from)
      await until(() => t.agent.jobs.budget.usedBytes === 0, 10_000, "the completed jobs' bytes to come back");
    } finally {
      await t.agent.close();
    }
  }, 180_000);

  it("refuses a Content-Length no ten files of the largest size could reach, before reading a byte", async () => {
    const t = await startTranscription({ maxUpload: "1mb" });
    try {
      const port = Number(new URL(t.base).port);
      // a few bytes of the 50 MB declared; the answer comes without them
      const answer = await rawRequest(
        port,
        { path: "/api/process", method: "POST", headers: { "content-type": "multipart/form-data; boundary=b", "content-length": String(50 * 1024 ** 2) } },
        "--b--\r\n",
      );
      expect(answer.status).toBe(413);
      expect(JSON.parse(answer.body).error).toMatchObject({ code: "request_too_large", message: expect.stringMatching(/^Content-Length: 52428800 bytes is more than 10 files/) });
      expect(t.agent.jobs.budget.usedBytes).toBe(0);
    } finally {
      await t.agent.close();
    }
  });

  it("an upload without a length is charged as it streams: 507 once it passes the budget, its partial file removed", async () => {
    const t = await startTranscription({ uploadBudget: "2mb" });
    try {
      const boundary = "kiln-chunked";
      const head = `--${boundary}\r\nContent-Disposition: form-data; name="audio"; filename="big.wav"\r\nContent-Type: audio/wav\r\n\r\n`;
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new TextEncoder().encode(head));
        },
        pull(c) {
          if (sent >= 8 * 1024 ** 2) return c.close();
          sent += 256 * 1024;
          c.enqueue(new Uint8Array(256 * 1024));
        },
      });
      const res = await fetch(`${t.base}/api/process`, {
        method: "POST",
        body,
        duplex: "half",
        headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
      } as RequestInit);
      expect(res.status).toBe(507);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("insufficient_storage");
      expect(readdirSync(t.agent.jobs.uploadsDir)).toEqual([]);
      expect(t.agent.jobs.budget.usedBytes).toBe(0);
    } finally {
      await t.agent.close();
    }
  });

  it("a full queue refuses the next upload with 503 before storing a byte", async () => {
    const t = await startTranscription({ asrJobs: "1", asrQueue: "0" });
    try {
      const first = await upload(t.base, [makeMedia(media, "running.wav", { seconds: 240 })]);
      expect(first.status).toBe(202);
      const second = await upload(t.base, [makeMedia(media, "waiting.wav", { seconds: 32 })]);
      expect(second.status).toBe(503);
      expect(second.body.error).toMatchObject({ type: "service_unavailable_error", code: "queue_full", message: expect.stringMatching(/^audio: the transcription queue is full/) });
      expect(readdirSync(t.agent.jobs.uploadsDir)).toEqual([first.body.job_id]);
    } finally {
      await t.agent.close();
    }
  });

  it("caps the uploads one address has in flight: a second one while the first streams is a 429", async () => {
    const t = await startTranscription({ maxClientUploads: "1" });
    try {
      const boundary = "kiln-slow-upload";
      const port = Number(new URL(t.base).port);
      // A first upload that sends its headers and part of its body, then waits.
      const slow = request({ host: "127.0.0.1", port, path: "/api/process", method: "POST", headers: { "content-type": `multipart/form-data; boundary=${boundary}` } });
      const answered = new Promise<number>((resolve) =>
        slow.on("response", (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        }),
      );
      slow.write(`--${boundary}\r\nContent-Disposition: form-data; name="audio"; filename="slow.wav"\r\nContent-Type: audio/wav\r\n\r\n`);
      slow.write(Buffer.alloc(64 * 1024));
      await until(() => existsSync(t.agent.jobs.uploadsDir) && readdirSync(t.agent.jobs.uploadsDir).length === 1, 10_000, "the first upload to be staged");
      const second = await upload(t.base, [makeMedia(media, "second.wav", { seconds: 1 })]);
      expect(second.status).toBe(429);
      expect(second.body.error).toMatchObject({
        type: "rate_limit_error",
        code: "too_many_requests_in_flight",
        message: expect.stringMatching(/^audio: this address already has 1 uploads in progress/),
      });
      slow.end(`\r\n--${boundary}--\r\n`);
      expect(await answered).toBe(202); // (silence: accepted, it ends in a clear error later)
      expect((await upload(t.base, [makeMedia(media, "third.wav", { seconds: 1 })])).status).toBe(202);
    } finally {
      await t.agent.close();
    }
  });
});

describe("retention", () => {
  it("sweeps results past --result-ttl and past --max-results, and files no job owns", async () => {
    const t = await startTranscription({ agentToken: TOKEN, resultTtl: "1h", maxResults: "2" });
    try {
      const ids: string[] = [];
      for (const name of ["r1.wav", "r2.wav", "r3.wav"]) {
        const res = await upload(t.base, [makeMedia(media, name, { seconds: 1 })], {}, operator);
        ids.push(res.body.job_id);
        await waitForJob(t.base, res.body.job_id);
      }
      const dataDir = join(t.agent.jobs.uploadsDir, "..");
      // A crash's leftovers: an upload folder no row owns, a work folder, a half-written result.
      mkdirSync(join(dataDir, "uploads", "0b0e6c1e-0000-4000-8000-000000000000"), { recursive: true });
      writeFileSync(join(dataDir, "uploads", "0b0e6c1e-0000-4000-8000-000000000000", "input"), "partial");
      mkdirSync(join(dataDir, "work", "stale"), { recursive: true });
      writeFileSync(join(dataDir, "results", `${ids[0]}.json.partial`), "{");

      // --max-results 2: the oldest finished job goes, the other two stay.
      expect(await t.agent.jobs.sweep()).toEqual({ jobs: 1, orphans: 3 });
      expect((await getJson(`${t.base}/api/status/${ids[0]}`, operator)).status).toBe(404);
      expect(existsSync(join(dataDir, "results", `${ids[0]}.json`))).toBe(false);
      expect(readdirSync(join(dataDir, "uploads"))).toEqual([]);
      expect(readdirSync(join(dataDir, "work"))).toEqual([]);
      expect((await getJson(`${t.base}/api/result/${ids[2]}`, operator)).status).toBe(200);

      // An hour later both are past the TTL.
      expect(await t.agent.jobs.sweep(Date.now() + 3601_000)).toEqual({ jobs: 2, orphans: 0 });
      for (const id of ids.slice(1)) expect((await getJson(`${t.base}/api/result/${id}`, operator)).status).toBe(404);
      expect(readdirSync(join(dataDir, "results"))).toEqual([]);
    } finally {
      await t.agent.close();
    }
  }, 60_000);
});

describe("ffmpeg reads local files in the accepted containers only", () => {
  let t: Transcription;
  let witness: Server;
  let hits = 0;
  beforeAll(async () => {
    t = await startTranscription();
    witness = createServer((_req, res) => {
      hits++;
      res.end();
    });
    await new Promise<void>((resolve) => witness.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    await t?.agent.close();
    witness?.close();
  });

  it.each([
    ["an HLS playlist naming a URL", "list.m3u8", (url: string) => `#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n${url}/seg.ts\n#EXT-X-ENDLIST\n`],
    ["a concat list naming a file on the host", "list.mp3", () => "ffconcat version 1.0\nfile /etc/passwd\n"],
    [
      "an SDP description naming a stream",
      "stream.wav",
      (url: string) => `v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio ${new URL(url).port} RTP/AVP 0\n`,
    ],
  ])("%s ends in a clear error and reaches nothing", async (_what, name, body) => {
    const url = `http://127.0.0.1:${(witness.address() as AddressInfo).port}`;
    const file = join(media, name);
    writeFileSync(file, body(url));
    const res = await upload(t.base, [file]);
    expect(res.status).toBe(202);
    const { view } = await waitForJob(t.base, res.body.job_id);
    expect(view.status).toBe("error");
    expect(view.error).toMatch(new RegExp(`^bad input: ${name.replace(".", "\\.")} (is not an audio or video file ffmpeg can read|could not be read)`));
    expect(hits).toBe(0);
  });
});

/**
 * The transcription API on :7860 against the real pipeline (ffmpeg, sherpa-onnx VAD, whisper.cpp
 * through Kiln's whisper addon) with the fabricated tiny whisper and energy-VAD models.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ffmpegPath } from "../agent/asr/ffmpeg.js";
import { tempDir, until } from "./helpers/fleet.js";
import { fetchJob, getJson, handleOf, makeMedia, QUICK_SPEECH_SECONDS, startTranscription, TEST_WHISPER_DIR, upload, waitForJob, type Transcription } from "./helpers/speech.js";

let t: Transcription;
let media: string;
const completed: Record<string, string> = {}; // format → job id

beforeAll(async () => {
  t = await startTranscription();
  media = tempDir();
});
afterAll(() => t?.agent.close());

/**
 * Sends the start of a multipart body (boundary "b") that declares 50 MB and never ends; resolves
 * with the answer, which therefore has to come before the rest of the body.
 */
function unfinishedUpload(base: string, pieces: (string | Buffer)[]): Promise<{ status: number; body: any; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/api/process`, { method: "POST", headers: { "content-type": "multipart/form-data; boundary=b", "content-length": 50 * 1024 ** 2 } }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text), connection: res.headers.connection }));
    });
    req.on("error", reject);
    for (const piece of pieces) req.write(piece);
  });
}

const FORMATS = ["mp3", "wav", "flac", "m4a", "aac", "ogg", "wma"];
const VIDEO = ["mp4", "avi", "mov"];

describe("POST /api/process", () => {
  it("transcribes every accepted format, ten files in one request, with monotonic progress and an integer ETA", async () => {
    const seconds = QUICK_SPEECH_SECONDS;
    const files = [...FORMATS.map((f) => makeMedia(media, `audio.${f}`, { seconds })), ...VIDEO.map((f) => makeMedia(media, `video.${f}`, { video: true, seconds }))];
    // no temperature fallback: the random-weight model would re-decode every window (this test is about formats)
    const res = await upload(t.base, files, { model: "base", temperature_increment: "0" });
    expect(res.status).toBe(202);
    expect(res.body.jobs).toHaveLength(10);
    for (const job of res.body.jobs) expect(job).toMatchObject({ job_id: expect.any(String), status: "processing", handle: expect.stringMatching(/^jh_/) });
    expect(new Set(res.body.jobs.map((j: { handle: string }) => j.handle)).size).toBe(10);
    for (const [i, job] of (res.body.jobs as { job_id: string; file_name: string }[]).entries()) {
      const { view, progress, etas } = await waitForJob(t.base, job.job_id);
      expect(view.status, `${job.file_name}: ${view.error}`).toBe("completed");
      expect(view.progress).toBe(1);
      for (let k = 1; k < progress.length; k++) expect(progress[k]!).toBeGreaterThanOrEqual(progress[k - 1]!);
      for (const eta of etas) expect(Number.isInteger(eta)).toBe(true);
      expect(view.result).toMatchObject({ language: expect.any(String), duration: expect.closeTo(seconds, 0), segments: expect.any(Array) });
      completed[files[i]!.split(".").pop()!] = job.job_id;
    }
  });

  it("tells the phase, in order, and an ETA that falls while progress rises within a phase (measured, not a first guess)", async () => {
    // long enough that the transcribing phase reads several whole seconds of ETA before its tail of 1 s, under a loaded suite too
    const res = await upload(t.base, [makeMedia(media, "lecture.flac", { seconds: 900 })], { temperature_increment: "0" });
    const { view, samples } = await waitForJob(t.base, res.body.job_id, 120_000);
    expect(view.status, view.error).toBe("completed");
    expect(view.phase).toBeNull();
    const order = ["queued", "decoding", "detecting_speech", "transcribing", "writing"];
    const seen = samples.map((s) => s.phase).filter((p, i, all) => p !== null && p !== all[i - 1]);
    expect(seen).toContain("transcribing");
    for (let i = 1; i < seen.length; i++) expect(order.indexOf(seen[i]!)).toBeGreaterThan(order.indexOf(seen[i - 1]!));
    const whisper = samples.filter((s) => s.phase === "transcribing");
    const moving = whisper.filter((s, i) => i > 0 && s.progress > whisper[i - 1]!.progress);
    expect(moving.length).toBeGreaterThanOrEqual(3);
    const [first, last] = [moving[0]!, moving.at(-1)!];
    expect(last.progress).toBeGreaterThan(first.progress);
    // the ETA is in whole seconds, rounded up: a short phase's tail reads 1 s to its end, so the fall is
    // read between the phase's highest ETA and a lower one after it, and it never ends above where it began
    const etas = moving.map((s) => s.eta);
    const highest = etas.indexOf(Math.max(...etas));
    expect(Math.min(...etas.slice(highest))).toBeLessThan(etas[highest]!);
    expect(last.eta).toBeLessThanOrEqual(first.eta);
    // measured: halfway through whisper, the ETA is near the time the job really took still (the
    // default guess of 2 s of speech a second would say a minute or more; this whisper is far faster)
    const end = samples.at(-1)!.at;
    const middle = moving[Math.floor(moving.length / 2)]!;
    expect(middle.eta).toBeLessThanOrEqual(3 * ((end - middle.at) / 1000) + 3);
  });

  it("answers one file with {job_id, status, handle}", async () => {
    const res = await upload(t.base, [makeMedia(media, "one.wav", { seconds: QUICK_SPEECH_SECONDS })]);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ job_id: expect.stringMatching(/^[0-9a-f-]{36}$/), status: "processing", handle: expect.stringMatching(/^jh_[\w-]{32}$/) });
    expect((await waitForJob(t.base, res.body.job_id)).view.status).toBe("completed");
  });

  it("ends a text file named .mp3, an empty file and a video with no audio in a clear error", async () => {
    const text = join(media, "notes.mp3");
    writeFileSync(text, "this is not audio at all\n".repeat(50));
    const empty = join(media, "empty.wav");
    writeFileSync(empty, "");
    const silent = makeMedia(media, "silent.mp4", { video: true, audio: false, seconds: 2 });
    const res = await upload(t.base, [text, empty, silent]);
    expect(res.status).toBe(202);
    const errors = await Promise.all((res.body.jobs as { job_id: string }[]).map(async (j) => (await waitForJob(t.base, j.job_id)).view));
    expect(errors.map((v) => v.status)).toEqual(["error", "error", "error"]);
    expect(errors[0].error).toMatch(/notes\.mp3 is not an audio or video file/);
    expect(errors[1].error).toMatch(/empty\.wav is empty/);
    expect(errors[2].error).toMatch(/silent\.mp4 has no audio track/);
    const result = await getJson(`${t.base}/api/result/${errors[0].job_id}`);
    expect(result.status).toBe(409);
    expect(result.body.error.code).toBe("job_failed");
  });

  it("writes no text for silence", async () => {
    const silence = join(media, "silence.wav");
    execFileSync(ffmpegPath(), ["-v", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", "8", silence]);
    const res = await upload(t.base, [silence]);
    const { view } = await waitForJob(t.base, res.body.job_id);
    expect(view.status).toBe("completed");
    expect(view.result).toMatchObject({ text: "", segments: [], duration: 8 });
  });

  it("refuses 11 files with a 400", async () => {
    const file = makeMedia(media, "short.wav", { seconds: 1 });
    const res = await upload(
      t.base,
      Array.from({ length: 11 }, () => file),
    );
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "too_many_files" });
    expect(res.body.error.message).toMatch(/^audio:/);
  });

  it.each([
    ["model", { model: "tiny" }, "invalid_model"],
    ["model", { model: "small" }, "model_not_installed"],
    ["language", { language: "klingon" }, "invalid_language"],
    // names every object inherits are no language: whisper.cpp took "constructor" as language -1 and its engine process died
    ["language", { language: "constructor" }, "invalid_language"],
    ["source_language", { translate: "true", target_language: "de", source_language: "__proto__" }, "invalid_language"],
    ["source_language", { language: "en", source_language: "de" }, "conflicting_language"],
    ["translate", { translate: "maybe" }, "invalid_boolean"],
    ["target_language", { translate: "true", target_language: "xx" }, "invalid_language"],
    ["target_language", { translate: "false", target_language: "de" }, "translate_disabled"],
    ["speaker_diarization", { speaker_diarization: "sometimes" }, "invalid_boolean"],
    ["min_speakers", { min_speakers: "two" }, "invalid_integer"],
    ["max_speakers", { max_speakers: "0" }, "invalid_speakers"],
    ["min_speakers", { min_speakers: "3", max_speakers: "2" }, "invalid_speakers"],
  ])("refuses a bad %s with a 400 naming it (%j)", async (field, fields, code) => {
    const res = await upload(t.base, [makeMedia(media, "f.wav", { seconds: 1 })], fields);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code });
    expect(res.body.error.message.startsWith(`${field}:`)).toBe(true);
  });

  it.each([
    ["a model not installed", "model=small", "model_not_installed", "model:"],
    ["speakers on a node without diarization models", "speaker_diarization=true", "diarization_unavailable", "speaker_diarization:"],
    ["translation beyond English on a node without a chat model", "target_language=de", "translation_unavailable", "target_language:"],
  ])("refuses %s when the field comes before the file: answered while the file still streams, nothing stored", async (_what, field, code, names) => {
    const dataDir = tempDir();
    const agent = await startTranscription({ dataDir });
    try {
      const [name, value] = field.split("=");
      const head = `--b\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n--b\r\nContent-Disposition: form-data; name="audio"; filename="long.wav"\r\n\r\n`;
      const answer = await unfinishedUpload(agent.base, [head, Buffer.alloc(64 * 1024, 1)]);
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ type: "invalid_request_error", code });
      expect(answer.body.error.message.startsWith(names)).toBe(true);
      expect(existsSync(join(dataDir, "uploads"))).toBe(false); // not a byte staged: not even the uploads folder was made
    } finally {
      await agent.agent.close();
    }
  });

  it("refuses a model not installed that comes after a file as soon as the field arrives: the next file is not waited for, none is kept, the connection is kept", async () => {
    const dataDir = tempDir();
    const agent = await startTranscription({ dataDir });
    try {
      const part = (name: string, file?: string) => `--b\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"` : ""}\r\n\r\n`;
      const first = readFileSync(makeMedia(media, "first.wav", { seconds: 2 }));
      const answer = await unfinishedUpload(agent.base, [
        part("audio", "first.wav"),
        first,
        `\r\n${part("model")}small\r\n${part("audio", "second.wav")}`,
        Buffer.alloc(64 * 1024, 1),
      ]);
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ code: "model_not_installed" });
      expect(readdirSync(join(dataDir, "uploads"))).toEqual([]);
      // not closed under a client still sending (the rest is read and dropped): it gets the answer, not a reset
      expect(answer.connection).not.toBe("close");
    } finally {
      await agent.agent.close();
    }
  });

  it("/readyz tells what /api/process accepts: the installed models, speakers and translation", async () => {
    const body = await (await fetch(`${t.base}/readyz`)).json();
    expect(body.transcription).toMatchObject({ vad_model: true, whisper_model_installed: true, whisper_models: ["base"], diarization: false, translation: false });
  });

  it.each([
    ["inside an audio part", `${"--b\r\n"}Content-Disposition: form-data; name="audio"; filename="a.wav"\r\n\r\nRIFF`],
    ["inside an ignored file part", `${"--b\r\n"}Content-Disposition: form-data; name="other"; filename="x.bin"\r\n\r\nxyz`],
    [
      "inside the second audio part",
      `--b\r\nContent-Disposition: form-data; name="audio"; filename="a.wav"\r\n\r\nRIFF\r\n--b\r\nContent-Disposition: form-data; name="audio"; filename="b.wav"\r\n\r\nRIFF`,
    ],
  ])("refuses a body that ends %s with a 400, keeps no file and serves on", async (_, body) => {
    const res = await fetch(`${t.base}/api/process`, { method: "POST", headers: { "content-type": "multipart/form-data; boundary=b" }, body });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("invalid_multipart");
    expect(error.message).toMatch(/^body: malformed multipart data \(Unexpected end of form\)/);
    const uploads = t.agent.jobs.uploadsDir;
    expect(existsSync(uploads) ? readdirSync(uploads) : []).toEqual([]);
    expect((await fetch(`${t.base}/api/models`)).status).toBe(200);
  });

  it("needs an audio part and multipart/form-data", async () => {
    const none = await upload(t.base, [], { model: "base" });
    expect(none.status).toBe(400);
    expect(none.body.error.code).toBe("missing_audio");
    const json = await fetch(`${t.base}/api/process`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(json.status).toBe(400);
    expect(((await json.json()) as { error: { code: string } }).error.code).toBe("invalid_content_type");
  });
});

describe("results", () => {
  it("JSON words lie inside their segments, in order, with confidences in 0-1", async () => {
    const { body } = await getJson(`${t.base}/api/result/${completed.wav}?format=json`);
    expect(body.segments.length).toBeGreaterThan(0);
    let last = 0;
    for (const s of body.segments) {
      expect(s.start).toBeLessThanOrEqual(s.end);
      expect(s.start).toBeGreaterThanOrEqual(last - 1e-9);
      for (const w of s.words) {
        expect(w.start).toBeGreaterThanOrEqual(s.start);
        expect(w.end).toBeLessThanOrEqual(s.end);
        expect(w.start).toBeLessThanOrEqual(w.end);
        expect(w.start).toBeGreaterThanOrEqual(last - 1e-9);
        expect(w.confidence).toBeGreaterThanOrEqual(0);
        expect(w.confidence).toBeLessThanOrEqual(1);
        last = w.start;
      }
    }
  });

  it("SRT and VTT parse, are ordered, never overlap and keep cues short", async () => {
    for (const format of ["srt", "vtt"] as const) {
      const res = await fetchJob(`${t.base}/api/result/${completed.wav}?format=${format}`);
      expect(res.headers.get("content-type")).toContain(format === "srt" ? "subrip" : "text/vtt");
      const text = await res.text();
      if (format === "vtt") expect(text.startsWith("WEBVTT\n")).toBe(true);
      const sep = format === "srt" ? "," : "\\.";
      const cue = new RegExp(`(\\d{2,}):(\\d{2}):(\\d{2})${sep}(\\d{3}) --> (\\d{2,}):(\\d{2}):(\\d{2})${sep}(\\d{3})\\n((?:.+\\n?)+)`, "g");
      const cues = [...text.matchAll(cue)].map((m) => ({
        start: +m[1]! * 3600 + +m[2]! * 60 + +m[3]! + +m[4]! / 1000,
        end: +m[5]! * 3600 + +m[6]! * 60 + +m[7]! + +m[8]! / 1000,
        lines: m[9]!.trim().split("\n"),
      }));
      expect(cues.length).toBeGreaterThan(0);
      let previousEnd = 0;
      for (const c of cues) {
        expect(c.start).toBeGreaterThanOrEqual(previousEnd);
        expect(c.end).toBeGreaterThan(c.start);
        expect(c.end - c.start).toBeLessThanOrEqual(7.001);
        expect(c.lines.length).toBeLessThanOrEqual(2);
        previousEnd = c.end;
      }
    }
  });

  it("TXT holds the text; an unknown format and an unknown job are refused", async () => {
    const txt = await fetchJob(`${t.base}/api/result/${completed.mp3}?format=txt`);
    expect(txt.status).toBe(200);
    const json = (await getJson(`${t.base}/api/result/${completed.mp3!}`)).body;
    expect((await txt.text()).trim()).toBe(json.segments.map((s: { text: string }) => s.text).join("\n"));
    const bad = await getJson(`${t.base}/api/result/${completed.mp3}?format=docx`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/^format:/);
    // Without the instance's token nobody learns whether a job id exists: no handle opens it.
    const missing = await getJson(`${t.base}/api/status/no-such-job`, { authorization: `Bearer ${handleOf(completed.mp3!)}` });
    expect(missing.status).toBe(401);
    expect(missing.body.error).toMatchObject({ type: "authentication_error", code: "invalid_job_handle" });
  });
});

describe("GET /api/models", () => {
  it("lists the spec's five models first with their sizes, then the newer and English-only ones, with languages, installed and loaded", async () => {
    const { status, body } = await getJson(`${t.base}/api/models`);
    expect(status).toBe(200);
    expect(body.models.map((m: { name: string }) => m.name)).toEqual([
      "base",
      "small",
      "medium",
      "large",
      "large-v2",
      "large-v3",
      "large-v3-turbo",
      "base.en",
      "small.en",
      "medium.en",
    ]);
    expect(body.models.slice(0, 5).map((m: { size: string }) => m.size)).toEqual(["39MB", "244MB", "769MB", "1550MB", "1550MB"]);
    expect(body.models.map((m: { languages: number }) => m.languages)).toEqual([99, 99, 99, 99, 99, 99, 99, 1, 1, 1]);
    expect(body.models[0]).toMatchObject({ size_bytes: 147_951_465 });
    expect(body.models[0]).toMatchObject({ installed: true, loaded: true });
    expect(body.models[1]).toMatchObject({ installed: false, loaded: false });
  });
});

describe("KILN_AGENT_TOKEN", () => {
  it("guards every /api call when set", async () => {
    const guarded = await startTranscription({ agentToken: "s3cret-token-of-16" });
    try {
      expect((await getJson(`${guarded.base}/api/models`)).status).toBe(401);
      expect((await getJson(`${guarded.base}/api/models`, { authorization: "Bearer wrong" })).status).toBe(401);
      expect((await getJson(`${guarded.base}/api/models`, { authorization: "Bearer s3cret-token-of-16" })).status).toBe(200);
      expect((await upload(guarded.base, [makeMedia(media, "g.wav", { seconds: 1 })])).status).toBe(401);
    } finally {
      await guarded.agent.close();
    }
  });
});

describe("a whisper model file that cannot load", () => {
  it.each([
    ["not a model", (file: string) => writeFileSync(file, "not a whisper model\n")],
    [
      "a model cut in half",
      (file: string) => {
        const whole = readFileSync(join(TEST_WHISPER_DIR, "ggml-base.bin"));
        writeFileSync(file, whole.subarray(0, whole.length >> 1));
      },
    ],
  ])("(%s) ends the job in an error, and the agent serves on", async (_, write) => {
    const dir = tempDir();
    write(join(dir, "ggml-base.bin"));
    const broken = await startTranscription({ whisperDir: dir });
    try {
      const res = await upload(broken.base, [makeMedia(media, "b.wav", { seconds: 2 })]);
      expect(res.status).toBe(202);
      const { view } = await waitForJob(broken.base, res.body.job_id);
      expect(view.status).toBe("error");
      expect(view.error).toMatch(/whisper model "base" failed to load from .*ggml-base\.bin/);
      expect((await getJson(`${broken.base}/api/models`)).status).toBe(200);
    } finally {
      await broken.agent.close();
    }
  });
});

describe("metrics", () => {
  it("count finished jobs by outcome and record their real-time factor", async () => {
    const text = await (await fetch(`${t.base}/metrics`)).text();
    const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    expect(value(/^kiln_asr_jobs_total\{outcome="completed"[^}]*\} (\d+)/m)).toBeGreaterThanOrEqual(11);
    expect(value(/^kiln_asr_jobs_total\{outcome="error"[^}]*\} (\d+)/m)).toBeGreaterThanOrEqual(3);
    expect(value(/^kiln_asr_realtime_factor_count\{[^}]*\} (\d+)/m)).toBeGreaterThanOrEqual(11);
  });
});

describe("partial results", () => {
  /** The server-sent events of a job's stream, parsed as they arrive (each with when it came), until it ends. */
  async function readEvents(id: string, headers: Record<string, string> = {}): Promise<{ event: string; data: any; id?: string; at: number }[]> {
    const res = await fetchJob(`${t.base}/api/jobs/${id}/events`, { headers });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events: { event: string; data: any; id?: string; at: number }[] = [];
    const decoder = new TextDecoder();
    let text = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = text.indexOf("\n\n")) >= 0) {
        const block = text.slice(0, end);
        text = text.slice(end + 2);
        if (!block.includes("data:")) continue;
        const id = /^id: (.*)$/m.exec(block)?.[1];
        events.push({ event: /^event: (.*)$/m.exec(block)![1]!, data: JSON.parse(/^data: (.*)$/m.exec(block)![1]!), ...(id !== undefined ? { id } : {}), at: performance.now() });
      }
    }
    return events;
  }

  it("/api/jobs/{id}/events delivers every segment in order before done, while the job runs; the status' segments only grow", async () => {
    const file = makeMedia(media, "long.wav", { seconds: 120 });
    const res = await upload(t.base, [file], { model: "base" });
    const id = res.body.job_id as string;
    const streamed = readEvents(id);
    // at most 16 streams per job: the 17th is a 429; closed streams give their places back
    const extra = new AbortController();
    const more = await Promise.all(Array.from({ length: 15 }, () => fetchJob(`${t.base}/api/jobs/${id}/events`, { signal: extra.signal })));
    expect(more.map((r) => r.status)).toEqual(new Array(15).fill(200));
    const refused = await fetchJob(`${t.base}/api/jobs/${id}/events`);
    expect(refused.status).toBe(429);
    expect((await refused.json()).error).toMatchObject({ code: "too_many_watchers" });
    extra.abort();
    await until(
      async () => {
        const again = await fetchJob(`${t.base}/api/jobs/${id}/events`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
        const ok = again?.status === 200;
        await again?.body?.cancel().catch(() => undefined);
        return ok;
      },
      10_000,
      "a place freed by the closed streams",
    );
    const seen: number[] = [];
    let view: any;
    let completedAt = 0;
    let tail: number[] | undefined;
    await until(
      async () => {
        view = (await getJson(`${t.base}/api/status/${id}`)).body;
        if (view.status === "processing") {
          seen.push(view.segments.length);
          if (view.segments.length >= 2 && !tail) {
            // the segments after one it has: the rest, from the next id on
            const after = view.segments.length - 2;
            tail = (await getJson(`${t.base}/api/status/${id}?segments_after=${after}`)).body.segments.map((s: { id: number }) => s.id);
            expect(tail![0]).toBe(after + 1);
            for (let k = 1; k < tail!.length; k++) expect(tail![k]).toBe(tail![k - 1]! + 1);
          }
        } else completedAt = performance.now();
        return view.status !== "processing";
      },
      120_000,
      `job ${id}`,
    );
    expect(view.status).toBe("completed");
    for (let k = 1; k < seen.length; k++) expect(seen[k]!).toBeGreaterThanOrEqual(seen[k - 1]!);
    expect(seen.some((n) => n > 0 && n < view.result.segments.length)).toBe(true); // words seen before the end
    expect(tail).toBeDefined();
    expect(view.segments).toEqual([]); // once completed, they are the result's
    expect(view.result.segments.length).toBeGreaterThan(1);

    const events = await streamed;
    expect(events.at(-1)).toMatchObject({ event: "done", data: { status: "completed" } });
    const segmentEvents = events.filter((e) => e.event === "segment");
    expect(segmentEvents[0]!.at).toBeLessThan(completedAt); // streamed as they were finished, not at the end
    const segments = segmentEvents.map((e) => e.data);
    expect(segmentEvents.map((e) => e.id)).toEqual(segments.map((s) => String(s.id)));
    expect(segments.map((s) => s.id)).toEqual(view.result.segments.map((_: unknown, i: number) => i));
    expect(segments.map((s) => [s.start, s.end, s.text])).toEqual(view.result.segments.map((s: any) => [s.start, s.end, s.text]));
    const progress = events.filter((e) => e.event === "progress").map((e) => e.data.progress as number);
    expect(progress.length).toBeGreaterThan(1);
    for (let k = 1; k < progress.length; k++) expect(progress[k]!).toBeGreaterThanOrEqual(progress[k - 1]!);

    // a polling client asks for the segments after the last it has (while it runs; checked here on a running job's copy below)
    const bad = await getJson(`${t.base}/api/status/${id}?segments_after=x`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_segments_after" });

    // a reconnecting client (Last-Event-ID) gets only the segments after the last one it saw
    const resumed = await readEvents(id, { "last-event-id": String(segments.length - 2) });
    expect(resumed.filter((e) => e.event === "segment").map((e) => e.data.id)).toEqual([segments.length - 1]);

    // a stream opened after the end replays the state: every segment, then done
    const late = await readEvents(id);
    expect(late.filter((e) => e.event === "segment")).toHaveLength(segments.length);
    expect(late.at(-1)!.event).toBe("done");
  }, 180_000);

  it("an events stream needs the job's own handle", async () => {
    const res = await upload(t.base, [makeMedia(media, "short.wav", { seconds: QUICK_SPEECH_SECONDS })], { model: "base" });
    const id = res.body.job_id as string;
    const other = (await upload(t.base, [makeMedia(media, "other.wav", { seconds: QUICK_SPEECH_SECONDS })], { model: "base" })).body.job_id as string;
    expect((await (await fetch(`${t.base}/api/jobs/${id}/events`)).json()).error).toMatchObject({ code: "missing_job_handle" });
    const wrong = await fetch(`${t.base}/api/jobs/${id}/events`, { headers: { authorization: `Bearer ${handleOf(other)}` } });
    expect(wrong.status).toBe(401);
    expect((await wrong.json()).error).toMatchObject({ code: "invalid_job_handle" });
    await waitForJob(t.base, id);
    await waitForJob(t.base, other);
  });
});

describe("decoding options", () => {
  it("the prompt reaches whisper (the same audio decodes otherwise with it), and the voice-activity threshold decides what is speech", async () => {
    let file = makeMedia(media, "options.wav", { seconds: QUICK_SPEECH_SECONDS });
    const run = async (fields: Record<string, string>) => {
      const res = await upload(t.base, [file], { model: "base", temperature_increment: "0", ...fields });
      expect(res.status).toBe(202);
      const { view } = await waitForJob(t.base, res.body.job_id);
      expect(view.status, view.error).toBe("completed");
      return view.result as { text: string; segments: { start: number; end: number; words: { confidence: number }[] }[] };
    };
    const plain = await run({});
    expect(await run({})).toEqual(plain); // greedy without the fallback: the same text every time
    // the random test model writes the same words whatever comes before them, but not as surely
    const confidences = (r: typeof plain) => r.segments.flatMap((s) => s.words.map((w) => w.confidence));
    const prompted = await run({ prompt: "Kiln transcribes the meeting of the GPU network operators." });
    expect(confidences(prompted)).not.toEqual(confidences(plain));
    // quiet bursts: the test's energy VAD gives them a speech probability of about 0.35
    file = makeMedia(media, "quiet.wav", { seconds: 12, source: "aevalsrc=0.0085*sin(2*PI*440*t)*gt(mod(t\\,3)\\,1):s=16000:d=12" });
    expect((await run({ vad_threshold: "0.95" })).segments).toEqual([]);
    expect((await run({ vad_threshold: "0.05", min_silence_ms: "200" })).segments.length).toBeGreaterThan(0);
  }, 120_000);
});

describe("language detection", () => {
  it("reports the detected language's probability, and none when the request names the language", async () => {
    const file = makeMedia(media, "which-language.wav", { seconds: QUICK_SPEECH_SECONDS });
    const detect = await upload(t.base, [file], { model: "base" });
    const named = await upload(t.base, [file], { model: "base", language: "de" });
    const detected = (await waitForJob(t.base, detect.body.job_id)).view.result;
    expect(detected.language).toMatch(/^[a-z]{2,3}$/);
    expect(detected.language_probability).toBeGreaterThan(0);
    expect(detected.language_probability).toBeLessThanOrEqual(1);
    const given = (await waitForJob(t.base, named.body.job_id)).view.result;
    expect(given.language).toBe("de");
    expect(given).not.toHaveProperty("language_probability");
  });
});

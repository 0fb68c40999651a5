/**
 * OpenAI's audio API through the fleet: the official `openai` client against a real `kiln dev`
 * process (every response format, words, streaming, translation, the model list, an upload over
 * the limit), then a scheduler with agents of its own: a batch shared by two agents, a client that
 * goes away, and an agent killed mid-job. The audio is jfk.mp3 with KILN_TEST_DATA, else an mp3 made
 * by ffmpeg here; the whisper model is the fabricated one (noise words, the real pipeline).
 */
import { createReadStream, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, spawnKiln, startDev, tempDir, until, NODE_TOKEN, type KilnProcess } from "./helpers/fleet.js";
import { execFileSync } from "node:child_process";
import { ffmpegPath } from "../agent/asr/ffmpeg.js";
import { makeMedia, QUICK_SPEECH_SECONDS, TEST_EMBEDDING, TEST_SEGMENTATION, TEST_VAD, TEST_WHISPER_DIR, twoVoices } from "./helpers/speech.js";

const DATA = process.env.KILN_TEST_DATA;
const JFK = DATA ? join(DATA, "audio", "jfk.mp3") : "";
const media = tempDir();
/** jfk.mp3 (11 s) when the test data is there, else 16 s of tone bursts as mp3 (which the fabricated model decodes at once: QUICK_SPEECH_SECONDS). */
const AUDIO = JFK && existsSync(JFK) ? JFK : makeMedia(media, "speech.mp3", { seconds: QUICK_SPEECH_SECONDS });
/** Tone bursts for the slower translate task: as quick for the fabricated model, and its shorter text is quicker to translate. */
const SHORT = makeMedia(media, "short.mp3", { seconds: QUICK_SPEECH_SECONDS });
/** A WAV of about 1 MB: over the dev instance's 256 KiB limit below. */
const LARGE = makeMedia(media, "large.wav", { seconds: 32 });

const SRT_CUE = /^(\d+)\n(\d{2}):(\d{2}):(\d{2}),(\d{3}) --> (\d{2}):(\d{2}):(\d{2}),(\d{3})\n([^\n]+(?:\n[^\n]+)?)$/;
const VTT_TIME = /^(\d{2}):(\d{2}):(\d{2})\.(\d{3}) --> (\d{2}):(\d{2}):(\d{2})\.(\d{3})$/;
const seconds = (h: string, m: string, s: string, ms: string) => Number(h) * 3600 + Number(m) * 60 + Number(s) + Number(ms) / 1000;

/** The cues' times in order, checked: each starts before it ends, none starts before the previous one ended. */
function checkTimes(times: [number, number][]): void {
  expect(times.length).toBeGreaterThan(0);
  let last = 0;
  for (const [start, end] of times) {
    expect(start).toBeLessThan(end);
    expect(start).toBeGreaterThanOrEqual(last);
    last = end;
  }
}

describe("the openai client against kiln dev", () => {
  let dev: KilnProcess;
  let client: OpenAI;
  let base: string;
  let key: string;
  const spool = tempDir();
  const agentData = tempDir();

  beforeAll(async () => {
    ({ proc: dev, base, key } = await startDev(["--asr-parallel", "1", "--asr-threads", "1", "--spool-dir", spool, "--max-audio-upload", "256kb"], { KILN_DATA_DIR: agentData }));
    client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 60_000 });
  }, 60_000);
  afterAll(() => dev?.stop());

  const file = () => createReadStream(AUDIO);

  it("json: the text and the audio's duration as usage", async () => {
    const t = await client.audio.transcriptions.create({ file: file(), model: "whisper-1" });
    expect(t.text.trim().length).toBeGreaterThan(0);
    expect(t.usage).toEqual({ type: "duration", seconds: expect.any(Number) });
    expect((t.usage as { seconds: number }).seconds).toBeGreaterThanOrEqual(9);
  });

  it("text: the transcript as plain text", async () => {
    const json = await client.audio.transcriptions.create({ file: file(), model: "base", temperature: 0 });
    const text = await client.audio.transcriptions.create({ file: file(), model: "base", response_format: "text", temperature: 0 });
    expect(typeof text).toBe("string");
    expect((text as unknown as string).trim()).toBe(json.text.trim());
  });

  it("srt: numbered cues in order, each at most two lines, starting before they end", async () => {
    const srt = (await client.audio.transcriptions.create({ file: file(), model: "whisper-1", response_format: "srt" })) as unknown as string;
    const cues = srt.trim().split(/\n\n/);
    const times: [number, number][] = cues.map((cue, i) => {
      const m = SRT_CUE.exec(cue);
      expect(m, cue).not.toBeNull();
      expect(Number(m![1])).toBe(i + 1);
      return [seconds(m![2]!, m![3]!, m![4]!, m![5]!), seconds(m![6]!, m![7]!, m![8]!, m![9]!)];
    });
    checkTimes(times);
  });

  it("vtt: a WEBVTT header, then cues in order", async () => {
    const vtt = (await client.audio.transcriptions.create({ file: file(), model: "whisper-1", response_format: "vtt" })) as unknown as string;
    const [header, ...cues] = vtt.trim().split(/\n\n/);
    expect(header).toBe("WEBVTT");
    checkTimes(
      cues.map((cue) => {
        const [time, ...lines] = cue.split("\n");
        const m = VTT_TIME.exec(time!);
        expect(m, cue).not.toBeNull();
        expect(lines.length).toBeGreaterThanOrEqual(1);
        expect(lines.length).toBeLessThanOrEqual(2);
        return [seconds(m![1]!, m![2]!, m![3]!, m![4]!), seconds(m![5]!, m![6]!, m![7]!, m![8]!)];
      }),
    );
  });

  it("verbose_json: segments, and words with their start and end when asked", async () => {
    const v = await client.audio.transcriptions.create({ file: file(), model: "whisper-1", response_format: "verbose_json", timestamp_granularities: ["word", "segment"] });
    expect((v as { task?: string }).task).toBe("transcribe");
    expect(typeof v.language).toBe("string");
    expect(v.duration).toBeGreaterThanOrEqual(9);
    expect(v.segments!.length).toBeGreaterThan(0);
    for (const s of v.segments!) {
      expect(s.end).toBeGreaterThan(s.start);
      expect(s.end).toBeLessThanOrEqual(v.duration + 0.01);
    }
    expect(v.words!.length).toBeGreaterThan(0);
    for (const w of v.words!) {
      expect(typeof w.word).toBe("string");
      expect(w.end).toBeGreaterThanOrEqual(w.start);
    }
    expect(v.segments!.map((s) => s.text.trim()).join(" ")).toBe(v.text.trim());
    const plain = await client.audio.transcriptions.create({ file: file(), model: "whisper-1", response_format: "verbose_json" });
    expect(plain).not.toHaveProperty("words"); // words only when asked
  });

  it("stream: transcript.text.delta events, then one transcript.text.done with the whole text", async () => {
    const stream = await client.audio.transcriptions.create({ file: file(), model: "whisper-1", stream: true });
    const events: { type: string; delta?: string; text?: string }[] = [];
    for await (const event of stream) events.push(event);
    const deltas = events.filter((e) => e.type === "transcript.text.delta");
    expect(deltas.length).toBeGreaterThan(0);
    expect(events.at(-1)!.type).toBe("transcript.text.done");
    expect(events.filter((e) => e.type === "transcript.text.done")).toHaveLength(1);
    expect(events.findIndex((e) => e.type === "transcript.text.done")).toBe(events.length - 1);
    expect(
      deltas
        .map((d) => d.delta)
        .join("")
        .trim(),
    ).toBe(events.at(-1)!.text!.trim());
  });

  it("stream: the head carries the request's headers (request id, ignored fields), and the events end with the done", async () => {
    const form = new FormData();
    form.set("model", "whisper-1");
    form.set("stream", "true");
    form.set("a_future_field", "1");
    form.set("file", new Blob([readFileSync(AUDIO)]), "speech.mp3");
    const res = await fetch(`${base}/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("x-kiln-ignored-fields")).toBe("a_future_field");
    expect(res.headers.get("x-request-id")).toBeTruthy();
    const text = await res.text();
    expect(text).toMatch(/^data: \{"type":"transcript\.text\.delta"/);
    expect(text).toMatch(/data: \{"type":"transcript\.text\.done"[^\n]*\n\n$/);
  });

  it("translations: the translate task, in each format", async () => {
    // the fabricated model's noise fails every fallback test: without the fallback (Kiln's extra field) it decodes once
    const short = () =>
      ({ file: createReadStream(SHORT), model: "whisper-1", temperature_increment: 0 }) as unknown as { file: ReturnType<typeof createReadStream>; model: string };
    const v = (await client.audio.translations.create({ ...short(), response_format: "verbose_json" })) as { task?: string; text: string };
    expect(v.task).toBe("translate");
    expect(v.text.trim().length).toBeGreaterThan(0);
    const srt = (await client.audio.translations.create({ ...short(), response_format: "srt" })) as unknown as string;
    expect(srt).toMatch(/^1\n\d{2}:\d{2}:\d{2},\d{3} --> /);
  });

  it("target_language translates through the node's chat model; diarize is refused where no node has diarization models", async () => {
    const v = (await client.audio.transcriptions.create({
      file: createReadStream(SHORT),
      model: "whisper-1",
      response_format: "verbose_json",
      target_language: "de",
      temperature_increment: 0,
    } as never)) as unknown as { translated_to?: string; text: string; segments: unknown[] };
    expect(v.translated_to).toBe("de");
    expect(v.segments.length).toBeGreaterThan(0);
    const err = await client.audio.transcriptions.create({ file: createReadStream(SHORT), model: "whisper-1", diarize: true } as never).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((err as InstanceType<typeof OpenAI.APIError>).message).toMatch(/with diarization/);
  });

  it("/v1/models lists whisper-1 and the installed whisper models", async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toContain("whisper-1");
    expect(ids).toContain("base");
    expect((await client.models.retrieve("whisper-1")).id).toBe("whisper-1");
  });

  it("refuses fields it cannot honour with a 400 naming them", async () => {
    const refused = async (body: Record<string, unknown>, param: string) => {
      const err = await client.audio.transcriptions.create({ file: file(), model: "whisper-1", ...body } as never).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
    };
    await refused({ response_format: "xml" }, "response_format");
    await refused({ timestamp_granularities: ["word"] }, "timestamp_granularities[]");
    await refused({ include: ["logprobs"] }, "include[]");
    await refused({ model: "whisper-9" }, "model");
    await refused({ language: "klingon" }, "language");
    await refused({ stream: true, response_format: "srt" }, "stream");
  });

  it("a tenant's field named after an object's own properties is a field like any other, and the scheduler stays up", async () => {
    const form = new FormData();
    for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty"]) form.append(name, "x");
    form.append("model", "whisper-1");
    form.append("file", new Blob([new Uint8Array(readFileSync(AUDIO))]), "a.mp3");
    const res = await fetch(`${base}/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-kiln-ignored-fields")).toBe("constructor, __proto__, toString, hasOwnProperty");
    expect(((await res.json()) as { text: string }).text.length).toBeGreaterThan(0);
  });

  it("an upload over the limit is a 413 while it streams, and neither side keeps any of it", async () => {
    const err = await client.audio.transcriptions.create({ file: await toFile(createReadStream(LARGE), "large.wav"), model: "whisper-1" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    await until(() => readdirSync(spool).length === 0, 5000, "the scheduler's spool to be empty");
    const uploads = join(agentData, "uploads");
    await until(() => !existsSync(uploads) || readdirSync(uploads).length === 0, 5000, "the agent's uploads to be empty");
  });
});

describe("the fleet path with agents of its own", () => {
  let scheduler: SchedulerHandle;
  let key: string;
  const agents: AgentHandle[] = [];
  const speech = { whisperDir: TEST_WHISPER_DIR, vadModel: TEST_VAD, asrParallel: "1", asrThreads: "1", asrJobs: "1" };

  beforeAll(async () => {
    scheduler = await inProcessScheduler();
    key = (await scheduler.keys.create({ account: "audio", tier: "pro" })).token;
  });
  afterAll(async () => {
    for (const a of agents) await a.close().catch(() => undefined);
    await scheduler?.close();
  });

  async function post(path: string, fields: Record<string, string>, audio = AUDIO, signal?: AbortSignal): Promise<Response> {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    form.append("file", new Blob([new Uint8Array(readFileSyncCached(audio))]), "audio.mp3");
    return fetch(`${httpBase(scheduler)}/v1/audio/${path}`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form, ...(signal ? { signal } : {}) });
  }

  it("two agents share a batch of requests", async () => {
    for (const nodeId of ["audio-a", "audio-b"]) agents.push(await inProcessAgent(scheduler, { nodeId, serve: [], ...speech }));
    await until(() => scheduler.fleet.transcriptionModels().includes("whisper-1") && scheduler.fleet.snapshot().length === 2, 15_000, "two transcribing agents");
    const served = agents.map(() => 0);
    agents.forEach((agent, i) => {
      const submit = agent.jobs.submit.bind(agent.jobs);
      agent.jobs.submit = (uploads, options) => {
        served[i]! += uploads.length;
        return submit(uploads, options);
      };
    });
    const answers = await Promise.all(Array.from({ length: 4 }, () => post("transcriptions", { model: "whisper-1" })));
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(((await res.json()) as { text: string }).text.trim().length).toBeGreaterThan(0);
    }
    expect(served).toEqual([2, 2]);
  }, 120_000);

  it("diarize goes to the agent with diarization models, and its segments carry speakers", async () => {
    const diarizing = await inProcessAgent(scheduler, { nodeId: "audio-speakers", serve: [], ...speech, segmentationModel: TEST_SEGMENTATION, embeddingModel: TEST_EMBEDDING });
    agents.push(diarizing);
    await until(() => scheduler.fleet.transcribes("whisper-1", ["diarization"]), 15_000, "a diarizing agent");
    const voices = makeMedia(media, "voices.wav", { seconds: 8, source: twoVoices(8) });
    // no temperature fallback (Kiln's extra field): the fabricated model's noise fails every fallback test, and this is about speakers
    const res = await post("transcriptions", { model: "whisper-1", diarize: "true", response_format: "verbose_json", temperature_increment: "0" }, voices);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { segments: { speaker?: string }[] };
    expect(body.segments.length).toBeGreaterThan(0);
    for (const s of body.segments) expect(s.speaker).toMatch(/^SPEAKER_\d\d$/);
  }, 60_000);

  it("a file over four hours is a 400 naming it, from the node's probe, before any transcription", async () => {
    const path = join(tempDir(), "long.wav");
    // 4 h 2 min of silence, as small as WAV goes (2 kHz, 8-bit: 29 MB)
    execFileSync(ffmpegPath(), ["-v", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=2000:cl=mono", "-t", "14520", "-c:a", "pcm_u8", path]);
    const res = await post("transcriptions", { model: "whisper-1" }, path);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("invalid_audio");
    expect(body.error.message).toMatch(/4-hour limit/);
  }, 60_000);

  it("a client that goes away cancels the agent's job", async () => {
    const long = makeMedia(media, "long.mp3", { seconds: 120 });
    const ac = new AbortController();
    const res = post("transcriptions", { model: "whisper-1" }, long, ac.signal).catch(() => undefined);
    await until(() => agents.some((a) => a.jobs.counts().running > 0), 30_000, "the job to run on an agent");
    ac.abort();
    await res;
    // cancelled, then removed (the removal follows the cancel: a job may be seen "cancelled" for a moment)
    await until(() => agents.every((a) => a.jobs.list(10).data.length === 0), 10_000, "the agents' jobs to be cancelled and removed");
    for (const a of agents) expect(a.jobs.counts().running + a.jobs.counts().queued).toBe(0);
  }, 60_000);

  it("an agent killed mid-job fails the request within 5 s", async () => {
    for (const a of agents.splice(0)) await a.close();
    await until(() => scheduler.fleet.snapshot().length === 0, 10_000, "the agents to leave");
    const proc = spawnKiln(
      [
        "agent",
        "--scheduler",
        `127.0.0.1:${scheduler.grpc.port}`,
        "--node-id",
        "audio-doomed",
        "--whisper-dir",
        TEST_WHISPER_DIR,
        "--vad-model",
        TEST_VAD,
        "--asr-parallel",
        "1",
        "--asr-threads",
        "1",
        "--gpu",
        "cpu",
      ],
      { KILN_NODE_TOKEN: NODE_TOKEN },
    );
    try {
      await until(() => scheduler.fleet.transcriptionModels().includes("whisper-1"), 30_000, "the agent to join");
      const long = makeMedia(media, "long2.mp3", { seconds: 200 });
      const answer = post("transcriptions", { model: "whisper-1" }, long);
      await proc.waitFor(/fleet transcription queued/, 30_000);
      await new Promise((r) => setTimeout(r, 500));
      proc.child.kill("SIGKILL");
      const killed = Date.now();
      const res = await answer;
      expect(Date.now() - killed).toBeLessThan(5000);
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { code: string } }).error.code).toMatch(/agents_failed|agent_lost/);
    } finally {
      await proc.stop("SIGKILL");
    }
  }, 90_000);
});

const cache = new Map<string, Buffer>();
function readFileSyncCached(path: string): Buffer {
  let data = cache.get(path);
  if (!data) cache.set(path, (data = readFileSync(path)));
  return data;
}

describe("a node that cannot transcribe", () => {
  it("refuses a fleet transcription before storing any of it, and the client's error names no path of the node", async () => {
    const scheduler = await inProcessScheduler();
    const missing = join(tempDir(), "silero_vad.onnx");
    const dataDir = tempDir();
    const agent = await inProcessAgent(scheduler, {
      nodeId: "audio-novad",
      serve: [],
      whisperDir: TEST_WHISPER_DIR,
      vadModel: missing,
      dataDir,
      asrParallel: "1",
      asrThreads: "1",
    });
    try {
      const key = (await scheduler.keys.create({ account: "novad", tier: "pro" })).token;
      await until(() => scheduler.fleet.transcriptionModels().includes("whisper-1"), 15_000, "the agent to join");
      const form = new FormData();
      form.append("model", "whisper-1");
      form.append("file", new Blob([new Uint8Array(readFileSyncCached(AUDIO))]), "audio.mp3");
      const res = await fetch(`${httpBase(scheduler)}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
      expect(res.status).toBeGreaterThanOrEqual(500);
      const body = (await res.json()) as { error: { message: string } };
      expect(body.error.message).toContain("cannot transcribe now");
      expect(body.error.message).not.toContain(missing);
      expect(
        readdirSync(dataDir, { recursive: true, withFileTypes: true })
          .filter((e) => e.isFile() && !e.name.startsWith("jobs.db"))
          .map((e) => e.name),
      ).toEqual([]);
    } finally {
      await agent.close();
      await scheduler.close();
    }
  }, 60_000);
});

describe("the audio uploads one account may hold", () => {
  it("a second upload while the first still streams is a 429 for that account, not for another", async () => {
    const spool = tempDir();
    const scheduler = await inProcessScheduler({ audioUploadsPerAccount: "1", spoolDir: spool });
    const { token: key } = await scheduler.keys.create({ account: "hoarder", tier: "pro" });
    const { token: other } = await scheduler.keys.create({ account: "neighbour", tier: "pro" });
    const boundary = "kiln-test";
    let push!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        push = c;
      },
    });
    const first = fetch(`${httpBase(scheduler)}/v1/audio/transcriptions`, {
      method: "POST",
      body,
      duplex: "half",
      headers: { authorization: `Bearer ${key}`, "content-type": `multipart/form-data; boundary=${boundary}` },
    } as RequestInit).catch(() => undefined);
    push.enqueue(new TextEncoder().encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n`));
    try {
      await until(() => readdirSync(spool).length > 0, 5000, "the first upload to be spooled");
      const again = async (token: string) => {
        const form = new FormData();
        form.append("model", "whisper-1");
        form.append("file", new Blob([new Uint8Array(16)]), "b.wav");
        return fetch(`${httpBase(scheduler)}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form });
      };
      const refused = await again(key);
      expect(refused.status).toBe(429);
      const error = ((await refused.json()) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("too_many_requests_in_flight");
      expect(error.message).toMatch(/^file: .*audio requests/);
      expect((await again(other)).status).not.toBe(429); // another account's upload goes on (to a 503: no agent here)
    } finally {
      push.error(new Error("done"));
      await first;
      await scheduler.close();
    }
  });
});

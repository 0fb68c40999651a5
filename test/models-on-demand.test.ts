/**
 * Models on demand, against a hub on loopback in Hugging Face's layout (helpers/hub.ts): an
 * instance fetches the whisper model a job names, jobs share the download, a failed one names the
 * model and the hub, `--offline` refuses before the body is stored, `--pull` and `--serve ID=hf:…`
 * fetch at start, and `kiln models pull | list | rm` work as a command.
 */
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { promisify } from "node:util";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex, startHub, type TestHub } from "./helpers/hub.js";
import { ensureTestSplitModel } from "../fabricate/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, postChat, tempDir, TINY_MODEL, until, waitForAgents } from "./helpers/fleet.js";
import { GreedyReference } from "./helpers/reference.js";
import { fetchJob, getJson, makeMedia, TEST_VAD, QUICK_SPEECH_SECONDS, startTranscription, TEST_WHISPER_DIR, upload, waitForJob, type Transcription } from "./helpers/speech.js";

const CHROMIUM = process.env.KILN_CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].find((p) => existsSync(p));
const run = promisify(execFile);
const kiln = (args: string[], env: Record<string, string> = {}): Promise<{ code?: number; stdout: string; stderr: string }> =>
  run(process.execPath, [resolve("bin/kiln.js"), ...args], { env: { ...process.env, KILN_LOG_LEVEL: "info", ...env } }).catch(
    (e: { code: number; stdout: string; stderr: string }) => e,
  );

/** The fabricated whisper weights (random, real format): what the hub serves as made-up models. */
const WEIGHTS = readFileSync(join(TEST_WHISPER_DIR, "ggml-base.bin"));
const REPO = "acme/whisper-ggml";

let hub: TestHub;
let audio: string;
/** A catalog with made-up models the hub serves: `slow` trickles, `missing` is not on the hub. */
let catalog: string;

beforeAll(async () => {
  hub = await startHub();
  // a few seconds a download (each connection trickles): long enough to be seen moving
  hub.put(REPO, "ggml-slow.bin", { body: WEIGHTS, bytesPerSecond: 1_500_000 });
  hub.put(REPO, "ggml-fast.bin", { body: WEIGHTS });
  const entry = (name: string, file: string) => ({ name, repo: REPO, file, sha256: sha256Hex(WEIGHTS), size_bytes: WEIGHTS.length, languages: 99 });
  catalog = join(tempDir(), "catalog.json");
  writeFileSync(catalog, JSON.stringify([entry("slow", "ggml-slow.bin"), entry("fast", "ggml-fast.bin"), entry("missing", "ggml-missing.bin")]));
  audio = makeMedia(tempDir(), "speech.wav", { seconds: QUICK_SPEECH_SECONDS });
});
afterAll(() => hub.close());

const requestsFor = (file: string) => hub.requests.filter((r) => r.path.endsWith(`/${file}`));

describe("an instance fetches the whisper model a job names", () => {
  let t: Transcription;
  let whisperDir: string;
  beforeAll(async () => {
    whisperDir = tempDir(); // nothing installed
    t = await startTranscription({ whisperDir, whisperCatalog: catalog, hubUrl: hub.url, offline: "false", asrJobs: "2" });
  });
  afterAll(() => t.agent.close());

  it("lists the merged catalog in /api/models, each model with its size and whether it is installed", async () => {
    const { body } = await getJson(`${t.base}/api/models`);
    expect(body.on_demand).toBe(true);
    expect(body.models.map((m: { name: string }) => m.name)).toEqual([
      ...["base", "small", "medium", "large", "large-v2", "large-v3", "large-v3-turbo", "base.en", "small.en", "medium.en"],
      ...["slow", "fast", "missing"],
    ]);
    expect(body.models.find((m: { name: string }) => m.name === "slow")).toMatchObject({ size_bytes: WEIGHTS.length, languages: 99, installed: false });
  });

  it("downloads it in phase downloading_model with its own progress, shows the download in /api/models, then transcribes", async () => {
    const submitted = await upload(t.base, [audio], { model: "slow", temperature_increment: "0" });
    expect(submitted.status).toBe(202);
    const id = submitted.body.job_id as string;
    const downloads: number[] = [];
    let listed: number | undefined;
    await until(async () => {
      const { body } = await getJson(`${t.base}/api/status/${id}`);
      if (body.phase === "downloading_model") {
        expect(body.download).toMatchObject({ model: "slow", total_bytes: WEIGHTS.length });
        downloads.push(body.download.fraction);
        listed ??= (await getJson(`${t.base}/api/models`)).body.models.find((m: { name: string }) => m.name === "slow").downloading;
      }
      return body.phase !== "queued" && body.phase !== "downloading_model";
    }, 20_000);
    expect(downloads.length).toBeGreaterThan(1);
    expect(downloads.at(-1)!).toBeGreaterThan(downloads[0]!);
    expect(listed).toBeGreaterThanOrEqual(0);
    expect(listed).toBeLessThanOrEqual(1);
    const { view } = await waitForJob(t.base, id);
    expect(view.status).toBe("completed");
    expect(readFileSync(join(whisperDir, "ggml-slow.bin")).equals(WEIGHTS)).toBe(true);
    const models = (await getJson(`${t.base}/api/models`)).body.models;
    expect(models.find((m: { name: string }) => m.name === "slow")).toMatchObject({ installed: true });
    expect(models.find((m: { name: string }) => m.name === "slow").downloading).toBeUndefined();
  });

  it("two jobs waiting for the same model share one download", async () => {
    // held until both jobs are seen waiting for it
    let release: () => void = () => undefined;
    hub.put(REPO, "ggml-shared.bin", { body: WEIGHTS, gate: new Promise<void>((r) => (release = r)) });
    const own = join(tempDir(), "catalog.json");
    writeFileSync(own, JSON.stringify([{ name: "shared", repo: REPO, file: "ggml-shared.bin", sha256: sha256Hex(WEIGHTS), size_bytes: WEIGHTS.length, languages: 99 }]));
    const shared = await startTranscription({ whisperDir: tempDir(), whisperCatalog: own, hubUrl: hub.url, offline: "false", asrJobs: "2" });
    try {
      const [a, b] = await Promise.all([
        upload(shared.base, [audio], { model: "shared", temperature_increment: "0" }),
        upload(shared.base, [audio], { model: "shared", temperature_increment: "0" }),
      ]);
      const phase = async (id: string) => (await getJson(`${shared.base}/api/status/${id}`)).body.phase as string;
      await until(async () => (await phase(a.body.job_id)) === "downloading_model" && (await phase(b.body.job_id)) === "downloading_model", 20_000);
      release();
      const [ja, jb] = await Promise.all([waitForJob(shared.base, a.body.job_id), waitForJob(shared.base, b.body.job_id)]);
      expect([ja.view.status, jb.view.status]).toEqual(["completed", "completed"]);
      // both waited for the download, which went out once
      expect(requestsFor("ggml-shared.bin").filter((r) => r.method === "HEAD")).toHaveLength(1);
    } finally {
      await shared.agent.close();
    }
  });

  it("a job waiting for its model's download gives its place to the next job, and takes one again once the model is there", async () => {
    // held until the test lets it go
    let release: () => void = () => undefined;
    hub.put(REPO, "ggml-place.bin", { body: WEIGHTS, gate: new Promise<void>((r) => (release = r)) });
    const own = join(tempDir(), "catalog.json");
    writeFileSync(own, JSON.stringify([{ name: "place", repo: REPO, file: "ggml-place.bin", sha256: sha256Hex(WEIGHTS), size_bytes: WEIGHTS.length, languages: 99 }]));
    const whisperDir = tempDir();
    copyFileSync(join(TEST_WHISPER_DIR, "ggml-base.bin"), join(whisperDir, "ggml-base.bin"));
    // one job at a time
    const one = await startTranscription({ whisperDir, whisperCatalog: own, hubUrl: hub.url, offline: "false", asrJobs: "1" });
    try {
      const waiting = (await upload(one.base, [audio], { model: "place", temperature_increment: "0" })).body.job_id as string;
      await until(async () => (await getJson(`${one.base}/api/status/${waiting}`)).body.phase === "downloading_model", 20_000);
      const next = (await upload(one.base, [audio], { model: "base", temperature_increment: "0" })).body.job_id as string;
      const done = await waitForJob(one.base, next);
      expect(done.view.status).toBe("completed");
      // the first job was still downloading when the second ended
      expect((await getJson(`${one.base}/api/status/${waiting}`)).body.phase).toBe("downloading_model");
      release();
      const first = await waitForJob(one.base, waiting, 30_000);
      expect(first.view.status).toBe("completed");
    } finally {
      await one.agent.close();
    }
  });

  it("a job cancelled while its model downloads ends cancelled, and the download it alone waited for stops", async () => {
    hub.put(REPO, "ggml-cancel.bin", { body: WEIGHTS, bytesPerSecond: 2_000_000 });
    const own = join(tempDir(), "catalog.json");
    writeFileSync(own, JSON.stringify([{ name: "cancel", repo: REPO, file: "ggml-cancel.bin", sha256: sha256Hex(WEIGHTS), size_bytes: WEIGHTS.length, languages: 99 }]));
    const whisperDir = tempDir();
    const c = await startTranscription({ whisperDir, whisperCatalog: own, hubUrl: hub.url, offline: "false" });
    try {
      const id = (await upload(c.base, [audio], { model: "cancel" })).body.job_id as string;
      await until(async () => (await getJson(`${c.base}/api/status/${id}`)).body.download?.downloaded_bytes > 0, 20_000);
      const cancelled = await fetchJob(`${c.base}/api/jobs/${id}/cancel`, { method: "POST" });
      expect(cancelled.status).toBe(200);
      expect((await getJson(`${c.base}/api/status/${id}`)).body.status).toBe("cancelled");
      await until(async () => (await getJson(`${c.base}/api/models`)).body.models.find((m: { name: string }) => m.name === "cancel").downloading === undefined);
      expect(existsSync(join(whisperDir, "ggml-cancel.bin"))).toBe(false);
    } finally {
      await c.agent.close();
    }
  });

  it("a model field that is not a catalog name never reaches the hub: a path, a reference, a URL or a file name is a 400", async () => {
    const asked = hub.requests.length;
    const before = readdirSync(whisperDir);
    for (const model of ["../../etc/passwd", "slow/../fast", "hf:acme/tiny-GGUF/tiny.gguf", "whisper:slow", `${hub.url}/${REPO}/resolve/main/ggml-slow.bin`, "ggml-slow.bin"]) {
      const res = await upload(t.base, [audio], { model });
      expect(res.status, model).toBe(400);
      expect(res.body.error, model).toMatchObject({ code: "invalid_model", param: "model" });
    }
    expect(hub.requests.length).toBe(asked);
    expect(readdirSync(whisperDir)).toEqual(before);
  });

  it("a failed download fails the job with an error naming the model and the hub", async () => {
    const submitted = await upload(t.base, [audio], { model: "missing" });
    expect(submitted.status).toBe(202);
    const { view } = await waitForJob(t.base, submitted.body.job_id);
    expect(view.status).toBe("error");
    // in general terms for the job's user; the agent's log has the details
    expect(view.error).toBe(`engine fault: whisper:missing could not be fetched from ${hub.url}: the hub has no such file`);
  });
});

describe.skipIf(!CHROMIUM)("the web UI on an instance that downloads models", () => {
  it("offers a model not installed with its download size, shows the job downloading it, then the model installed", async () => {
    hub.put(REPO, "ggml-ui.bin", { body: WEIGHTS, bytesPerSecond: 4_000_000 });
    const own = join(tempDir(), "catalog.json");
    writeFileSync(own, JSON.stringify([{ name: "ui", repo: REPO, file: "ggml-ui.bin", sha256: sha256Hex(WEIGHTS), size_bytes: WEIGHTS.length, languages: 99 }]));
    const t = await startTranscription({ whisperDir: tempDir(), whisperCatalog: own, hubUrl: hub.url, offline: "false" });
    const browser = await chromium.launch({ executablePath: CHROMIUM!, args: ["--no-sandbox"] });
    try {
      const page = await browser.newPage();
      await page.goto(t.base);
      const option = page.locator('#model option[value="ui"]');
      await expect.poll(() => option.textContent()).toBe("ui · 8MB · downloads on first use (8 MB)");
      expect(await option.isDisabled()).toBe(false);
      await page.selectOption("#model", "ui");
      await page.setInputFiles("#audio", audio);
      await page.click("#submit");
      const status = page.locator(".job .status").first();
      await status.filter({ hasText: /Processing · downloading the model ui \d+ % of 8 MB/ }).waitFor({ timeout: 20_000 });
      await expect.poll(() => option.textContent(), { timeout: 20_000 }).toMatch(/^ui · 8MB · downloading \d+ %$/);
      await status.filter({ hasText: "Completed · 100 %" }).waitFor({ timeout: 60_000 });
      await expect.poll(() => option.textContent(), { timeout: 10_000 }).toMatch(/^ui · 8MB( · loaded)?$/);
    } finally {
      await browser.close();
      await t.agent.close();
    }
  }, 90_000);
});

describe("through the fleet", () => {
  it("/v1/audio sends a model no agent has installed to one that downloads it, and the transcript comes back", async () => {
    // the catalog's "small" pointed at the made-up weights: a name the scheduler knows
    hub.put(REPO, "ggml-small-test.bin", { body: WEIGHTS });
    const own = join(tempDir(), "catalog.json");
    writeFileSync(own, JSON.stringify([{ name: "small", repo: REPO, file: "ggml-small-test.bin", sha256: sha256Hex(WEIGHTS), size_bytes: WEIGHTS.length, languages: 99 }]));
    const scheduler = await inProcessScheduler();
    const whisperDir = tempDir();
    const agent = await inProcessAgent(scheduler, {
      nodeId: "fetching",
      serve: [],
      whisperDir,
      vadModel: TEST_VAD,
      whisperCatalog: own,
      hubUrl: hub.url,
      offline: "false",
      fetchModels: "small",
    });
    try {
      await until(() => scheduler.fleet.transcriptionModels().includes("small"), 15_000, "the agent to offer small");
      const { token } = await scheduler.keys.create({ account: "fleet", tier: "pro" });
      const form = new FormData();
      form.append("model", "small");
      form.append("temperature_increment", "0");
      form.append("file", new Blob([new Uint8Array(readFileSync(audio))]), "speech.wav");
      const res = await fetch(`${httpBase(scheduler)}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(typeof ((await res.json()) as { text: string }).text).toBe("string");
      expect(readFileSync(join(whisperDir, "ggml-small-test.bin")).equals(WEIGHTS)).toBe(true);
    } finally {
      await agent.close();
      await scheduler.close();
    }
  }, 60_000);
});

describe("--fetch-models", () => {
  it("downloads only the models it names: a job for another one not installed is a 400 before anything is stored or fetched", async () => {
    const dataDir = tempDir();
    const t = await startTranscription({ dataDir, whisperDir: tempDir(), whisperCatalog: catalog, hubUrl: hub.url, offline: "false", fetchModels: "fast" });
    try {
      const models = (await getJson(`${t.base}/api/models`)).body.models as { name: string; on_demand: boolean }[];
      expect(models.filter((m) => m.on_demand).map((m) => m.name)).toEqual(["fast"]);
      const asked = hub.requests.length;
      const res = await upload(t.base, [audio], { model: "slow" });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "model_not_installed", param: "model" });
      expect(res.body.error.message).toBe('model: "slow" is not installed on this instance, which downloads only fast (installed: none)');
      expect(hub.requests.length).toBe(asked);
      const uploads = join(dataDir, "uploads");
      expect(existsSync(uploads) ? readdirSync(uploads) : []).toEqual([]);
    } finally {
      await t.agent.close();
    }
  });
});

describe("--offline", () => {
  it("answers a job for a model not installed with 400 model_not_installed naming it, before the body is stored", async () => {
    const dataDir = tempDir();
    const t = await startTranscription({ dataDir, whisperDir: TEST_WHISPER_DIR, whisperCatalog: catalog, hubUrl: hub.url, offline: "true" });
    try {
      expect((await getJson(`${t.base}/api/models`)).body.on_demand).toBe(false);
      const asked = hub.requests.length;
      const res = await upload(t.base, [audio], { model: "fast" });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "model_not_installed", param: "model" });
      expect(res.body.error.message).toContain('model: "fast" is not installed on this instance');
      expect(res.body.error.message).toContain("installed: base");
      // nothing staged, nothing fetched
      const uploads = join(dataDir, "uploads");
      expect(existsSync(uploads) ? readdirSync(uploads) : []).toEqual([]);
      expect(hub.requests.length).toBe(asked);
    } finally {
      await t.agent.close();
    }
  });
});

describe("fetching at start", () => {
  it("--pull fetches whisper models in the background while the API serves", async () => {
    const whisperDir = tempDir();
    const t = await startTranscription({ whisperDir, whisperCatalog: catalog, hubUrl: hub.url, offline: "false", pull: "whisper:fast" });
    try {
      await until(() => existsSync(join(whisperDir, "ggml-fast.bin")), 20_000, "the pulled model");
      await until(async () => (await getJson(`${t.base}/api/models`)).body.models.find((m: { name: string }) => m.name === "fast").installed === true);
      expect(readFileSync(join(whisperDir, "ggml-fast.bin")).equals(WEIGHTS)).toBe(true);
    } finally {
      await t.agent.close();
    }
  });

  it("--serve ID=hf:… pulls the GGUF into --models-dir and loads it; a cached file is not fetched again", async () => {
    const gguf = readFileSync(TINY_MODEL);
    hub.put("acme/tiny-GGUF", "tiny.gguf", { body: gguf });
    const modelsDir = tempDir();
    const raw = { modelsDir, hubUrl: hub.url, offline: "false", serve: "famB-v3.1=hf:acme/tiny-GGUF/tiny.gguf", threads: "1", contextSize: "256" };
    const first = await startTranscription(raw);
    try {
      expect(first.agent.engine.modelPools).toHaveLength(1);
      const pulled = readdirSync(modelsDir).filter((f) => f.endsWith(".gguf"));
      expect(pulled).toEqual([expect.stringMatching(/^hf_acme_tiny-GGUF_tiny\.[0-9a-f]{12}\.gguf$/)]);
      expect(readFileSync(join(modelsDir, pulled[0]!)).equals(gguf)).toBe(true);
    } finally {
      await first.agent.close();
    }
    // --offline: the cached file serves; one that is not there stops the start, naming it
    const offline = await startTranscription({ ...raw, offline: "true" });
    await offline.agent.close();
    await expect(startTranscription({ ...raw, offline: "true", serve: "famB-v3.1=hf:acme/tiny-GGUF/other.gguf" })).rejects.toThrow(
      "--serve / KILN_SERVE: hf:acme/tiny-GGUF/other.gguf (for famB-v3.1) is not in --models-dir and --offline forbids fetching it",
    );
    const asked = requestsFor("tiny.gguf").length;
    const second = await startTranscription(raw);
    try {
      expect(second.agent.engine.modelPools).toHaveLength(1);
      expect(requestsFor("tiny.gguf").length).toBe(asked);
    } finally {
      await second.agent.close();
    }
  });
});

describe("a split GGUF", () => {
  it("--serve ID=hf:…-00001-of-00002.gguf pulls every part under llama.cpp's split names, loads it from its first part, and answers a chat completion as the single file does", async () => {
    const parts = await ensureTestSplitModel(tempDir());
    for (const part of parts) hub.put("acme/split-GGUF", `Q/${basename(part)}`, { body: readFileSync(part) });
    const modelsDir = tempDir();
    const scheduler = await inProcessScheduler();
    const reference = await GreedyReference.load(TINY_MODEL);
    const agent = await inProcessAgent(scheduler, {
      serve: [`${MODEL_ID}=hf:acme/split-GGUF/Q/tiny-chat-split-00001-of-00002.gguf`],
      modelsDir,
      hubUrl: hub.url,
      offline: "false",
    });
    try {
      const pulled = readdirSync(modelsDir).filter((f) => f.endsWith(".gguf"));
      expect(pulled).toEqual([1, 2].map((i) => expect.stringMatching(new RegExp(`^hf_acme_split-GGUF_tiny-chat-split\\.[0-9a-f]{12}-0000${i}-of-00002\\.gguf$`))));
      pulled.forEach((f, i) => expect(readFileSync(join(modelsDir, f)).equals(readFileSync(parts[i]!))).toBe(true));
      expect(agent.engine.modelPools.map((p) => p.path)).toEqual([join(modelsDir, pulled[0]!)]);
      await waitForAgents(scheduler, 1);
      const { token } = await scheduler.keys.create({ account: "split", tier: "pro" });
      const messages = [{ role: "user" as const, content: "ping" }];
      const want = await reference.complete(messages, 64);
      expect(want.text, "the reference's own text").not.toBe("");
      const res = await postChat(httpBase(scheduler), token, { model: MODEL_ID, messages, max_tokens: 64, temperature: 0 });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.choices[0].message.content).toBe(want.text);
    } finally {
      await agent.close();
      await scheduler.close();
      await reference.dispose();
    }
  }, 60_000);
});

describe("kiln models", () => {
  it("pull logs a JSON line of progress off a terminal; list shows kind, size, sha256 and ids; rm deletes", async () => {
    const whisperDir = tempDir();
    const modelsDir = tempDir();
    const env = { KILN_WHISPER_DIR: whisperDir, KILN_MODELS_DIR: modelsDir, KILN_HUB_URL: hub.url, KILN_WHISPER_CATALOG: catalog, HF_TOKEN: "hf_never_printed_0123456789" };
    const pulled = await kiln(["models", "pull", "whisper:fast", "hf:acme/tiny-GGUF/tiny.gguf"], env);
    expect(pulled.code).toBeUndefined();
    const lines = pulled.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => l.msg === "downloading" && l.model === "whisper:fast").length).toBeGreaterThan(0);
    expect(lines.find((l) => l.msg === "installed" && l.model === "whisper:fast")).toMatchObject({ sha256: sha256Hex(WEIGHTS), size_bytes: WEIGHTS.length });
    expect(pulled.stdout + pulled.stderr).not.toContain("hf_never_printed");

    const gguf = lines.find((l) => l.msg === "installed" && l.model === "hf:acme/tiny-GGUF/tiny.gguf")!.path as string;
    const listed = await kiln(["models", "list", "--json"], { ...env, KILN_SERVE: "famB-v3.1=hf:acme/tiny-GGUF/tiny.gguf" });
    expect(JSON.parse(listed.stdout)).toEqual([
      { kind: "whisper", path: join(whisperDir, "ggml-fast.bin"), size_bytes: WEIGHTS.length, sha256: sha256Hex(WEIGHTS), ids: ["fast"], verified: true },
      {
        kind: "gguf",
        path: gguf,
        size_bytes: readFileSync(TINY_MODEL).length,
        sha256: sha256Hex(readFileSync(TINY_MODEL)),
        ids: ["hf:acme/tiny-GGUF/tiny.gguf", "famB-v3.1"],
        verified: null,
      },
    ]);
    const table = await kiln(["models", "list"], env);
    expect(table.stdout.split("\n")[0]).toMatch(/^KIND\s+SIZE\s+SHA256\s+VERIFIED\s+IDS\s+PATH$/);

    const removed = await kiln(["models", "rm", "whisper:fast"], env);
    expect(removed.stdout).toBe(`removed ${join(whisperDir, "ggml-fast.bin")}\n`);
    expect(existsSync(join(whisperDir, "ggml-fast.bin"))).toBe(false);
    const again = await kiln(["models", "rm", "whisper:fast"], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe("kiln: whisper:fast is not installed\n");
  });

  it.skipIf(!existsSync("/usr/bin/script"))("pull draws a progress bar with bytes, speed and the share done on a terminal", async () => {
    hub.put("acme/tty-GGUF", "tty.gguf", { body: WEIGHTS, bytesPerSecond: 8_000_000 });
    const modelsDir = tempDir();
    // util-linux's script runs the command on a pseudo-terminal
    const { CI: _ci, ...env } = process.env;
    const { stdout } = await run("/usr/bin/script", ["-qec", `${process.execPath} ${resolve("bin/kiln.js")} models pull hf:acme/tty-GGUF/tty.gguf`, "/dev/null"], {
      env: { ...env, KILN_MODELS_DIR: modelsDir, KILN_HUB_URL: hub.url },
    });
    const text = stdout.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");
    expect(text).toContain(`pulling hf:acme/tty-GGUF/tty.gguf from ${hub.url}`);
    expect(text).toMatch(/⏵ hf_acme_t.*\.gguf +\d+(\.\d+)?% \([\d.]+[kM]B\/8\.41MB\) +[\d.]+[kM]?B\/s/);
    expect(text).toContain(`sha256 ${sha256Hex(WEIGHTS)}`);
    const installed = /installed: (\S+)/.exec(text)![1]!;
    expect(installed.startsWith(`${modelsDir}/hf_acme_tty-GGUF_tty.`)).toBe(true);
    expect(readFileSync(installed).equals(WEIGHTS)).toBe(true);
  });

  it("too little disk, or a reference that would leave the folder, fails with a clear message and exit code 1", async () => {
    hub.put("acme/huge-GGUF", "huge.gguf", { body: Buffer.alloc(10), announcedSize: 2 ** 50 });
    const env = { KILN_MODELS_DIR: tempDir(), KILN_HUB_URL: hub.url };
    const huge = await kiln(["models", "pull", "hf:acme/huge-GGUF/huge.gguf"], env);
    expect(huge.code).toBe(1);
    expect(huge.stderr).toMatch(new RegExp(`^kiln: hf:acme/huge-GGUF/huge\\.gguf could not be fetched from ${hub.url}: it needs 1125899\\.9 GB more on the disk of .+ free`));
    const bad = await kiln(["models", "pull", "hf:acme/../etc/x.gguf"], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('"hf:acme/../etc/x.gguf" is not a model reference');
  });
});

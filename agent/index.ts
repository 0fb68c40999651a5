/**
 * `kiln agent`: the daemon of a GPU instance. It serves the transcription API on port 7860 and,
 * given a scheduler, loads its chat models, probes the hardware and joins the fleet.
 */
import { randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { freemem, totalmem } from "node:os";
import { join, resolve } from "node:path";
import { MODEL_NAME } from "../models/operator-catalog.js";
import { formatHostPort, type AgentConfig, type HostPort } from "../config/index.js";
import { agentChannelCredentials } from "../config/tls.js";
import { ConfigError } from "../core/errors.js";
import { listenHttp, uploadTimeoutMs } from "../core/http/index.js";
import { createLogger, type Logger } from "../core/log.js";
import { checkDiarizationModels, checkVadModel, Transcriber, WhisperPool, type Translator } from "./asr/index.js";
import { probeHardware } from "./hardware/index.js";
import { createAgentApp, type NodeInfo } from "./http/index.js";
import { freeBytes, nonEmptyFile } from "../core/disk.js";
import { checkPipeline, JobService } from "./jobs/index.js";
import { FleetTranscriptions, SchedulerLinks } from "./link/index.js";
import { LlmEngine } from "./llm/index.js";
import type { Speculation } from "../core/speculation.js";
import { Replicas } from "./placement/index.js";
import { createAgentMetrics, type AgentMetrics } from "./metrics.js";
import type { Hardware } from "../proto/index.js";
import type { ChannelCredentials } from "@grpc/grpc-js";
import { speechModelFor } from "../models/speech.js";
import { WHISPER_LANGUAGES } from "../models/whisper.js";
import { logProgress, ModelHub, PullError } from "../hub/index.js";
import { EngineError, JobAbortedError } from "./asr/errors.js";
import { checkFfmpeg, FFMPEG_NEEDS, useFfmpeg } from "./asr/ffmpeg.js";
import type { WhisperFetcher } from "./asr/whisper.js";

/** The spec's limits on one transcription input. */
export const MAX_AUDIO_SECONDS = 4 * 3600;
export const MAX_FILES = 10;
/** How often finished jobs past their TTL, and orphaned files, are swept (also once at start). */
const SWEEP_EVERY_MS = 3600_000;
/** A connection that sends nothing for this long (an upload that stalled) is closed. */
const IDLE_TIMEOUT_MS = 120_000;

export interface AgentHandle {
  engine: LlmEngine;
  /** The links to the schedulers, one each; absent on a transcription-only instance (no `--scheduler`). */
  links?: SchedulerLinks;
  jobs: JobService;
  whisper: WhisperPool;
  /** The bound address of the transcription API. */
  http: HostPort;
  /** Drains (finishing running chat work within `deadlineMs`, default 0), stops jobs between chunks, unloads models. */
  close(deadlineMs?: number): Promise<void>;
}

export async function startAgent(config: AgentConfig, logger: Logger = createLogger("agent", config.logLevel)): Promise<AgentHandle> {
  for (const { id } of config.serve) {
    // the scheduler's catalog decides which ids it routes (the built-in ones, or an operator's catalog and its aliases)
    if (!MODEL_NAME.test(id)) throw new ConfigError("--serve / KILN_SERVE", `"${id}" is not a model id: 1 to 128 letters, digits, '.', ':', '_', '-' or '/'`);
  }
  // The certificate files first: a bad one fails the start before models load.
  const credentials = config.scheduler ? agentChannelCredentials(config, logger) : undefined;
  const hub = new ModelHub({
    source: { url: config.hubUrl, ...(config.hfToken ? { token: config.hfToken } : {}) },
    whisperDir: resolve(config.whisperDir),
    modelsDir: resolve(config.modelsDir),
    catalog: config.whisperCatalog,
  });
  const serve = await pullServed(config, hub, logger);
  const engine = await LlmEngine.load({
    models: serve,
    sequences: config.sequences,
    contextSize: config.contextSize,
    threads: config.threads,
    gpu: config.gpu,
    logger,
    ...(config.batchSize !== undefined ? { batchSize: config.batchSize } : {}),
  });
  const speech = await startSpeech(config, engine, hub, logger);
  for (const ref of config.pull) {
    // in the background: the API serves meanwhile, and a job for the model waits for the same download
    void hub.pull(ref.ref, { onProgress: logProgress(logger, ref.ref) }).then(
      (p) => logger.info({ model: p.ref, path: p.path, sha256: p.sha256, cached: p.cached }, p.cached ? "--pull: already installed" : "--pull: installed"),
      (err: Error) => logger.error({ model: ref.ref }, `--pull failed: ${err.message}`),
    );
  }
  let links: SchedulerLinks | undefined;
  const metrics = createAgentMetrics({ jobs: () => work.jobs, whisper: () => speech.whisper, engine, links: () => links });
  const work = await startJobs(config, speech, metrics, logger);
  const hardware = await probeHardware(engine.compute, config.dataDir);
  // With a GPU in the machine, choose whisper's backend now, so the log says at start where transcription runs.
  if (hardware.gpus?.length) void speech.whisper.backend();
  const facts = { config, engine, hardware, jobs: work.jobs, links: () => links, ...speech };
  const http = await serveHttp(config, { ...facts, metrics }, logger).catch(async (err: unknown) => {
    await work.close();
    await engine.dispose();
    throw err;
  });
  logger.info(
    {
      http: formatHostPort(http.address),
      whisperDir: speech.whisperDir,
      installed: (await speech.whisper.status()).filter((m) => m.installed).map((m) => m.name),
      auth: Boolean(config.agentToken),
      uploadBudgetMb: Math.floor(work.uploadBudgetBytes / 1024 ** 2),
      requestTimeoutS: http.requestTimeoutMs / 1000,
    },
    "transcription API listening",
  );
  // with schedulers and no --serve, the node takes the replicas the schedulers place
  let replicas: Replicas | undefined;
  if (config.scheduler && config.serve.length === 0) {
    const gpus = await offeredGpus(engine, hardware, logger);
    replicas = new Replicas({
      engine,
      hub,
      // no GPU: the node's memory as one device, three quarters of it unless the operator says otherwise
      devices: gpus.length > 0 ? gpus : [{ name: "cpu", totalBytes: totalmem() }],
      ...(config.memoryBudget !== undefined ? { budgetBytes: config.memoryBudget } : gpus.length > 0 ? {} : { budgetBytes: Math.floor(totalmem() * 0.75) }),
      report: (r) => links?.tellReplica(r),
      offline: config.offline,
      logger,
    });
    logger.info({ devices: replicas.offered() }, "placeable: offering these devices to the schedulers' replicas");
  }
  links = await joinFleet(config, { ...facts, dataDir: work.dataDir, ...(credentials ? { credentials } : {}), ...(replicas ? { replicas } : {}) }, logger);
  return {
    engine,
    ...(links ? { links } : {}),
    jobs: work.jobs,
    whisper: speech.whisper,
    http: http.address,
    async close(deadlineMs = 0) {
      await links?.drain(deadlineMs);
      await http.close(Math.min(deadlineMs, 1000));
      hub.close();
      await work.close();
      await speech.whisper.dispose();
      await engine.dispose();
    },
  };
}

/**
 * `--serve ID=hf:…` entries pulled into --models-dir (a cached file is not fetched again; with
 * `--offline` it must be there), each with its installed path.
 */
async function pullServed(config: AgentConfig, hub: ModelHub, logger: Logger): Promise<{ id: string; path: string; speculative?: Speculation }[]> {
  const fetch = async (id: string, ref: string, option: string): Promise<string> => {
    if (config.offline) {
      const cached = await hub.cached(ref);
      if (!cached) throw new ConfigError(option, `${ref} (for ${id}) is not in --models-dir and --offline forbids fetching it`);
      return cached;
    }
    // a file already there is not fetched again
    const pulled = await hub.pull(ref, { onProgress: logProgress(logger, ref) });
    logger.info(
      { model: ref, id, path: pulled.path, sha256: pulled.sha256, cached: pulled.cached },
      pulled.cached ? "served model already in --models-dir" : "pulled a served model",
    );
    return pulled.path;
  };
  return Promise.all(
    config.serve.map(async ({ id, path, ref }) => {
      let speculative = config.speculative.find((s) => s.id === id)?.speculation;
      // a draft model from the hub is pulled like a served one
      if (speculative?.kind === "draft" && speculative.source.startsWith("hf:"))
        speculative = { kind: "draft", source: await fetch(id, speculative.source, "--speculative / KILN_SPECULATIVE") };
      return { id, path: ref ? await fetch(id, ref, "--serve / KILN_SERVE") : path, ...(speculative ? { speculative } : {}) };
    }),
  );
}

/** How jobs fetch a whisper model that is not installed: through the hub, one download per file; absent with --offline. */
function whisperFetcher(config: AgentConfig, hub: ModelHub, logger: Logger): WhisperFetcher | undefined {
  if (config.offline) return undefined;
  return {
    fetch: async (name, onProgress, signal) => {
      await hub.pull(`whisper:${name}`, { onProgress, signal }).catch((err: unknown) => {
        // stopped (the job cancelled, or the agent shutting down: the job resumes at the next start), not refused
        if (signal.aborted || hub.closed) throw new JobAbortedError();
        if (!(err instanceof PullError)) throw err;
        // the operator's log gets the details (paths, free disk, the hub's answer); the job's user the model, the hub and the reason in general terms
        logger.error({ model: `whisper:${name}`, code: err.code }, err.message);
        throw new EngineError(err.brief(`whisper:${name} could not be fetched from ${hub.hub}`));
      });
    },
    progress: (name) => hub.progress(`whisper:${name}`),
  };
}

/**
 * The diarization models: those `--segmentation-model` and `--embedding-model` name, else the two
 * `kiln models pull speech:…` installs into the whisper folder when both are there, else none.
 */
async function diarizationModels(config: AgentConfig, whisperDir: string): Promise<{ segmentation: string; embedding: string } | undefined> {
  if (config.segmentationModel && config.embeddingModel) return { segmentation: resolve(config.segmentationModel), embedding: resolve(config.embeddingModel) };
  const pulled = { segmentation: join(whisperDir, speechModelFor("segmentation").file), embedding: join(whisperDir, speechModelFor("embedding").file) };
  return (await nonEmptyFile(pulled.segmentation)) && (await nonEmptyFile(pulled.embedding)) ? pulled : undefined;
}

/** The transcription engines: whisper's pool, the voice-activity model, diarization and translation when configured. */
async function startSpeech(config: AgentConfig, engine: LlmEngine, hub: ModelHub, logger: Logger) {
  const whisperDir = resolve(config.whisperDir);
  const vadModel = resolve(config.vadModel ?? join(whisperDir, speechModelFor("vad").file));
  await checkVadModel(vadModel).catch((err: Error) => logger.warn({ vadModel }, `${err.message}: transcription jobs will fail until it is installed`));
  const fetcher = whisperFetcher(config, hub, logger);
  const whisper = new WhisperPool({
    dir: whisperDir,
    catalog: config.whisperCatalog,
    ...(fetcher ? { fetcher, fetchable: config.fetchModels } : {}),
    compute: config.gpu,
    // Each running job has its own engine process with its own loaded models: the budget is shared out.
    memoryBudgetMb: Math.floor(config.whisperMemory / 1024 ** 2 / config.asrJobs),
    parallel: config.asrParallel,
    threads: Math.max(1, Math.floor(config.asrThreads / config.asrParallel)),
    logger,
  });
  const diarization = await diarizationModels(config, whisperDir);
  if (diarization) await checkDiarizationModels(diarization); // a bad model fails the start, not a job
  const ffmpegFault = await startFfmpeg(config, logger);
  const translationModel = config.translationModel ?? config.serve[0]?.id;
  const transcriber = new Transcriber({
    whisper,
    vad: { model: vadModel },
    maxAudioSeconds: MAX_AUDIO_SECONDS,
    logger,
    ...(diarization ? { diarization } : {}),
    ...(translationModel ? { translator: chatTranslator(engine, translationModel) } : {}),
    ffmpegStallMs: config.ffmpegStallSeconds * 1000,
    ...(ffmpegFault ? { ffmpegFault } : {}),
  });
  const capabilities = { diarization: Boolean(diarization), translation: Boolean(translationModel) };
  return { whisperDir, vadModel, whisper, transcriber, capabilities, ffmpegFault };
}

/**
 * `--ffmpeg` chosen, and checked: the pipeline's probe and decode run once on a tiny generated
 * WAV, and its lists must hold every accepted format's demuxer and decoder. Returns why they
 * failed, and then transcription is refused (503 `engine_unavailable`, /readyz says so, and the
 * node does not offer it to a scheduler) while chat still serves; the log names the ffmpeg found
 * and the one needed.
 */
async function startFfmpeg(config: AgentConfig, logger: Logger): Promise<string | undefined> {
  useFfmpeg(config.ffmpeg);
  const check = await checkFfmpeg();
  if (check.ok) {
    if (check.instead)
      logger.warn(
        { ffmpeg: check.path, version: check.version, path_ffmpeg: check.instead.path },
        `the PATH's ffmpeg cannot run Kiln's decode (${check.instead.reason}): the npm-shipped ffmpeg runs it instead`,
      );
    logger.info({ ffmpeg: check.path, version: check.version }, "ffmpeg runs the decode");
    return undefined;
  }
  logger.error(
    { ffmpeg: check.path ?? null, version: check.version ?? null },
    `transcription refused: ffmpeg cannot run Kiln's decode (${check.reason}); it needs ${FFMPEG_NEEDS}`,
  );
  return check.reason;
}

/** The job service on the data folder, its interrupted jobs resumed, and the hourly sweep of finished ones. */
async function startJobs(config: AgentConfig, { transcriber, whisper }: { transcriber: Transcriber; whisper: WhisperPool }, metrics: AgentMetrics, logger: Logger) {
  const dataDir = resolve(config.dataDir);
  await mkdir(dataDir, { recursive: true });
  const uploadBudgetBytes = "bytes" in config.uploadBudget ? config.uploadBudget.bytes : Math.floor((await freeBytes(dataDir)) * config.uploadBudget.share);
  const jobs = new JobService({
    dataDir,
    transcriber,
    // a model not installed is fetched first (phase downloading_model), unless --offline
    prepareModel: (model, onProgress, signal) => whisper.ensure(model, onProgress, signal),
    concurrency: config.asrJobs,
    maxQueued: config.asrQueue,
    logger,
    uploadBudgetBytes,
    resultTtlSeconds: config.resultTtl,
    maxResults: config.maxResults,
    onFinished: (outcome, audio, wall) => metrics.jobFinished(outcome, audio, wall),
  });
  await jobs.recover();
  await jobs.sweep();
  const sweeper = setInterval(() => void jobs.sweep().catch((err: unknown) => logger.error({ err }, "sweeping finished jobs failed")), SWEEP_EVERY_MS).unref();
  return {
    jobs,
    dataDir,
    uploadBudgetBytes,
    async close() {
      clearInterval(sweeper);
      await jobs.close();
    },
  };
}

/** What the node panel, readiness and the fleet link read of the running agent. */
interface AgentFacts {
  config: AgentConfig;
  engine: LlmEngine;
  hardware: Hardware;
  jobs: JobService;
  whisper: WhisperPool;
  vadModel: string;
  /** Why the start check found ffmpeg unable to run the decode; absent when it can. */
  ffmpegFault: string | undefined;
  capabilities: { diarization: boolean; translation: boolean };
  links: () => SchedulerLinks | undefined;
}

/** The transcription API and the web UI on `--host:--port`. */
async function serveHttp(config: AgentConfig, facts: AgentFacts & { metrics: AgentMetrics }, logger: Logger) {
  const { jobs, whisper, capabilities, metrics } = facts;
  const app = createAgentApp({
    jobs,
    whisper,
    capabilities,
    pipeline: () => checkPipeline(facts.vadModel, whisper, facts.ffmpegFault),
    node: () => nodeInfo(facts),
    metrics,
    ready: () => readiness(facts),
    logger,
    limits: { fileBytes: config.maxUpload, files: MAX_FILES },
    maxClientUploads: config.maxClientUploads,
    loopbackHostsOnly: !config.agentToken && !config.agentInsecure,
    ...(config.agentToken ? { token: config.agentToken } : {}),
  });
  if (config.agentInsecure)
    logger.warn(
      { host: config.host },
      "--agent-insecure: the transcription API is served without a token; anyone who reaches this address can submit jobs (reading one still needs its handle)",
    );
  const requestTimeoutMs = uploadTimeoutMs(config.maxUpload);
  const listener = await listenHttp(app.fetch, { host: config.host, port: config.port }, { requestTimeoutMs, idleTimeoutMs: IDLE_TIMEOUT_MS });
  return Object.assign(listener, { requestTimeoutMs });
}

/** The node panel's facts (`GET /api/node`). */
async function nodeInfo({ config, hardware, jobs, links, capabilities }: AgentFacts): Promise<NodeInfo> {
  return {
    node_id: config.nodeId,
    compute: hardware.compute ?? "cpu",
    gpus: (hardware.gpus ?? []).map((g) => ({ model: g.model ?? "GPU", memory_total_bytes: Number(g.memory_total_bytes ?? 0) })),
    cpu: hardware.cpu_model ?? "",
    cpu_cores: hardware.cpu_cores ?? 0,
    memory_total_bytes: Number(hardware.memory_total_bytes ?? 0),
    memory_free_bytes: freemem(),
    jobs: jobs.counts(),
    scheduler: config.scheduler ? { address: config.scheduler.map(formatHostPort).join(","), state: links()?.state ?? "connecting" } : null,
    schedulers: links()?.describe() ?? [],
    chat_models: config.serve.map((s) => s.id),
    capabilities: { ...capabilities, max_upload_bytes: config.maxUpload, max_files: MAX_FILES },
  };
}

/** `/readyz`: chat models loaded and, with `--scheduler`, a link up; transcription's state reported beside. */
async function readiness({ config, engine, links, vadModel, ffmpegFault, whisper, capabilities }: AgentFacts) {
  const checks: Record<string, boolean> = {
    chat_models_loaded: engine.modelPools.length === new Set(config.serve.map((s) => resolve(s.path))).size,
  };
  // with several schedulers, one link up is enough: the node serves through it while the others reconnect
  if (config.scheduler) checks.scheduler_connected = (links()?.connected ?? 0) > 0;
  // Transcription readiness is reported, not required: a chat-only node is ready without it.
  const installed = (await whisper.status()).filter((m) => m.installed).map((m) => m.name);
  const transcription = {
    /** ffmpeg ran the pipeline's decode at start; when not, `ffmpeg_error` says why and no job is accepted. */
    ffmpeg: !ffmpegFault,
    ...(ffmpegFault ? { ffmpeg_error: ffmpegFault } : {}),
    vad_model: await checkVadModel(vadModel).then(
      () => true,
      () => false,
    ),
    whisper_model_installed: installed.length > 0,
    /** What `POST /api/process` would accept: the installed models, and speakers and translation (beyond English) when the node has their models. */
    whisper_models: installed,
    diarization: capabilities.diarization,
    translation: capabilities.translation,
  };
  return { ready: Object.values(checks).every(Boolean), checks, transcription };
}

/**
 * The GPUs a placeable node offers: those llama.cpp runs on, in its order (a replica's planned bytes
 * per device reach llama.cpp by that index); none on the CPU. Loads llama.cpp's backend, so that the
 * first replica placed here does not wait for it.
 */
async function offeredGpus(engine: LlmEngine, hardware: Hardware, logger: Logger): Promise<{ name: string; totalBytes: number }[]> {
  // none with --gpu cpu, whose backend loads here all the same
  const gpus = await engine.gpuDevices().catch((err: unknown) => {
    logger.error({ err: (err as Error).message }, "llama.cpp's backend failed to load; replicas placed here will fail");
    return [];
  });
  // node-llama-cpp's stock addon reports no memory per device: the hardware probe's, when it lists as many GPUs
  const probed = hardware.gpus?.length === gpus.length ? hardware.gpus : [];
  return gpus.map((g, i) => ({ name: `gpu${i} ${g.name}`, totalBytes: g.totalBytes || Number(probed[i]?.memory_total_bytes ?? 0) }));
}

/** With `--scheduler`: a link to each scheduler, serving chat and the fleet's transcriptions. */
async function joinFleet(
  config: AgentConfig,
  facts: AgentFacts & { dataDir: string; credentials?: ChannelCredentials; replicas?: Replicas },
  logger: Logger,
): Promise<SchedulerLinks | undefined> {
  if (!config.scheduler || !config.nodeToken) {
    logger.info("no --scheduler given: a transcription-only instance");
    return undefined;
  }
  const { engine, hardware, jobs, whisper, capabilities, dataDir, credentials } = facts;
  if (config.serve.length === 0 && !facts.replicas) logger.warn("no --serve given: this agent serves no chat model");
  logger.info(
    { compute: hardware.compute, gpus: hardware.gpus?.length ?? 0, cuda: hardware.cuda_available, cpu: hardware.cpu_model, cores: hardware.cpu_cores },
    hardware.gpus?.length ? "hardware" : "hardware: no GPU found; running on CPU",
  );
  const transcriptions = new FleetTranscriptions({
    jobs,
    whisper,
    capabilities,
    maxFileBytes: config.maxUpload,
    pipeline: () => checkPipeline(facts.vadModel, whisper, facts.ffmpegFault),
    ...(facts.ffmpegFault ? { ffmpegFault: facts.ffmpegFault } : {}),
    logger,
  });
  await transcriptions.refresh();
  const links = new SchedulerLinks({
    schedulers: config.scheduler,
    ...(credentials ? { credentials } : {}),
    nodeToken: config.nodeToken,
    nodeId: config.nodeId,
    engine,
    hardware,
    dataDir,
    streamIntervalMs: config.streamInterval,
    transcriptions,
    ...(facts.replicas ? { replicas: facts.replicas } : {}),
    logger,
  });
  links.start();
  return links;
}

/**
 * Translation with the node's chat model: one request per piece of text, greedy, asking for the
 * translation alone. Any instruction-following GGUF does; the fabricated test model answers noise.
 */
function chatTranslator(engine: LlmEngine, modelId: string): Translator {
  const name = (code: string) => WHISPER_LANGUAGES[code] ?? code;
  return async (text, from, to, signal) => {
    if (!text.trim()) return text;
    const result = await engine.generate(
      modelId,
      [
        { role: "system", content: `You translate ${name(from)} into ${name(to)}. Reply with the translation only, no notes.` },
        { role: "user", content: text },
      ],
      { temperature: 0, maxTokens: Math.max(32, text.length * 2), local: true, cacheScope: `translation:${randomUUID()}`, ...(signal ? { signal } : {}) },
    );
    return result.text;
  };
}

/**
 * `kiln agent`: the daemon of a GPU instance. It serves the transcription API on port 7860 and,
 * given a scheduler, loads its chat models, probes the hardware and joins the fleet.
 */
import { randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { freemem } from "node:os";
import { join, resolve } from "node:path";
import { isCatalogModel } from "../models/catalog.js";
import { formatHostPort, type AgentConfig, type HostPort } from "../config/index.js";
import { agentChannelCredentials } from "../config/tls.js";
import { ConfigError } from "../core/errors.js";
import { listenHttp, uploadTimeoutMs } from "../core/http/index.js";
import { createLogger, type Logger } from "../core/log.js";
import { checkDiarizationModels, checkVadModel, Transcriber, WhisperPool, type Translator } from "./asr/index.js";
import { probeHardware } from "./hardware/index.js";
import { createAgentApp, type NodeInfo } from "./http/index.js";
import { freeBytes } from "../core/disk.js";
import { JobService } from "./jobs/index.js";
import { FleetTranscriptions, SchedulerLinks } from "./link/index.js";
import { LlmEngine } from "./llm/index.js";
import { createAgentMetrics } from "./metrics.js";
import { WHISPER_LANGUAGES } from "../models/whisper.js";

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
    if (!isCatalogModel(id)) throw new ConfigError("--serve / KILN_SERVE", `"${id}" is not a catalog model id`);
  }
  // The certificate files first: a bad one fails the start before models load.
  const credentials = config.scheduler ? agentChannelCredentials(config, logger) : undefined;
  const engine = await LlmEngine.load({
    models: config.serve,
    sequences: config.sequences,
    contextSize: config.contextSize,
    threads: config.threads,
    gpu: config.gpu,
    logger,
    ...(config.batchSize !== undefined ? { batchSize: config.batchSize } : {}),
  });

  const whisperDir = resolve(config.whisperDir);
  const vadModel = resolve(config.vadModel ?? join(whisperDir, "silero_vad.onnx"));
  await checkVadModel(vadModel).catch((err: Error) => logger.warn({ vadModel }, `${err.message}: transcription jobs will fail until it is installed`));
  const whisper = new WhisperPool({
    dir: whisperDir,
    compute: config.gpu,
    // Each running job has its own engine process with its own loaded models: the budget is shared out.
    memoryBudgetMb: Math.floor(config.whisperMemory / 1024 ** 2 / config.asrJobs),
    parallel: config.asrParallel,
    threads: Math.max(1, Math.floor(config.asrThreads / config.asrParallel)),
    logger,
  });
  const diarization = config.segmentationModel && config.embeddingModel
    ? { segmentation: resolve(config.segmentationModel), embedding: resolve(config.embeddingModel) }
    : undefined;
  if (diarization) await checkDiarizationModels(diarization); // a bad model fails the start, not a job
  const translationModel = config.translationModel ?? config.serve[0]?.id;
  const transcriber = new Transcriber({
    whisper, vad: { model: vadModel }, maxAudioSeconds: MAX_AUDIO_SECONDS, logger,
    ...(diarization ? { diarization } : {}),
    ...(translationModel ? { translator: chatTranslator(engine, translationModel) } : {}),
    ffmpegStallMs: config.ffmpegStallSeconds * 1000,
  });
  let links: SchedulerLinks | undefined;
  const metrics = createAgentMetrics({ jobs: () => jobs, engine, links: () => links });
  const dataDir = resolve(config.dataDir);
  await mkdir(dataDir, { recursive: true });
  const uploadBudgetBytes = "bytes" in config.uploadBudget ? config.uploadBudget.bytes : Math.floor((await freeBytes(dataDir)) * config.uploadBudget.share);
  const jobs = new JobService({
    dataDir, transcriber, concurrency: config.asrJobs, maxQueued: config.asrQueue, logger,
    uploadBudgetBytes, resultTtlSeconds: config.resultTtl, maxResults: config.maxResults,
    onFinished: (outcome, audio, wall) => metrics.jobFinished(outcome, audio, wall),
  });
  await jobs.recover();
  await jobs.sweep();
  const sweeper = setInterval(() => void jobs.sweep().catch((err: unknown) => logger.error({ err }, "sweeping finished jobs failed")), SWEEP_EVERY_MS).unref();
  const hardware = await probeHardware(engine.compute, config.dataDir);
  // With a GPU in the machine, choose whisper's backend now, so the log says at start where transcription runs.
  if (hardware.gpus?.length) void whisper.backend();
  const capabilities = { diarization: Boolean(diarization), translation: Boolean(translationModel) };
  const node = async (): Promise<NodeInfo> => ({
    node_id: config.nodeId,
    compute: hardware.compute ?? "cpu",
    gpus: (hardware.gpus ?? []).map((g) => ({ model: g.model ?? "GPU", memory_total_bytes: Number(g.memory_total_bytes ?? 0) })),
    cpu: hardware.cpu_model ?? "",
    cpu_cores: hardware.cpu_cores ?? 0,
    memory_total_bytes: Number(hardware.memory_total_bytes ?? 0),
    memory_free_bytes: freemem(),
    jobs: jobs.counts(),
    scheduler: config.scheduler ? { address: config.scheduler.map(formatHostPort).join(","), state: links?.state ?? "connecting" } : null,
    schedulers: links?.describe() ?? [],
    chat_models: config.serve.map((s) => s.id),
    capabilities: { ...capabilities, max_upload_bytes: config.maxUpload, max_files: MAX_FILES },
  });
  const ready = async () => {
    const checks: Record<string, boolean> = {
      chat_models_loaded: engine.modelPools.length === new Set(config.serve.map((s) => resolve(s.path))).size,
    };
    // with several schedulers, one link up is enough: the node serves through it while the others reconnect
    if (config.scheduler) checks.scheduler_connected = (links?.connected ?? 0) > 0;
    // Transcription readiness is reported, not required: a chat-only node is ready without it.
    const transcription = {
      vad_model: await checkVadModel(vadModel).then(() => true, () => false),
      whisper_model_installed: (await whisper.status()).some((m) => m.installed),
    };
    return { ready: Object.values(checks).every(Boolean), checks, transcription };
  };
  const app = createAgentApp({
    jobs, whisper, capabilities, node, metrics, ready, logger,
    limits: { fileBytes: config.maxUpload, files: MAX_FILES }, maxClientUploads: config.maxClientUploads,
    loopbackHostsOnly: !config.agentToken && !config.agentInsecure,
    ...(config.agentToken ? { token: config.agentToken } : {}),
  });
  if (config.agentInsecure) logger.warn({ host: config.host }, "--agent-insecure: the transcription API is served without a token; anyone who reaches this address can submit jobs (reading one still needs its handle)");
  const requestTimeoutMs = uploadTimeoutMs(config.maxUpload);
  const http = await listenHttp(app.fetch, { host: config.host, port: config.port }, { requestTimeoutMs, idleTimeoutMs: IDLE_TIMEOUT_MS }).catch(async (err: unknown) => {
    clearInterval(sweeper);
    await jobs.close();
    await engine.dispose();
    throw err;
  });
  const installed = (await whisper.status()).filter((m) => m.installed).map((m) => m.name);
  logger.info({ http: formatHostPort(http.address), whisperDir, installed, auth: Boolean(config.agentToken), uploadBudgetMb: Math.floor(uploadBudgetBytes / 1024 ** 2), requestTimeoutS: requestTimeoutMs / 1000 }, "transcription API listening");

  if (config.scheduler && config.nodeToken) {
    if (config.serve.length === 0) logger.warn("no --serve given: this agent serves no chat model");
    logger.info({ compute: hardware.compute, gpus: hardware.gpus?.length ?? 0, cuda: hardware.cuda_available, cpu: hardware.cpu_model, cores: hardware.cpu_cores }, hardware.gpus?.length ? "hardware" : "hardware: no GPU found; running on CPU");
    const transcriptions = new FleetTranscriptions({ jobs, whisper, capabilities, maxFileBytes: config.maxUpload, logger });
    await transcriptions.refresh();
    links = new SchedulerLinks({ schedulers: config.scheduler, ...(credentials ? { credentials } : {}), nodeToken: config.nodeToken, nodeId: config.nodeId, engine, hardware, dataDir, streamIntervalMs: config.streamInterval, transcriptions, logger });
    links.start();
  } else {
    logger.info("no --scheduler given: a transcription-only instance");
  }

  return {
    engine,
    ...(links ? { links } : {}),
    jobs,
    whisper,
    http: http.address,
    async close(deadlineMs = 0) {
      await links?.drain(deadlineMs);
      await http.close(Math.min(deadlineMs, 1000));
      clearInterval(sweeper);
      await jobs.close();
      await whisper.dispose();
      await engine.dispose();
    },
  };
}

/**
 * Translation with the node's chat model: one request per piece of text, greedy, asking for the
 * translation alone. Any instruction-following GGUF does; the fabricated test model answers noise.
 */
function chatTranslator(engine: LlmEngine, modelId: string): Translator {
  const name = (code: string) => WHISPER_LANGUAGES[code] ?? code;
  return async (text, from, to, signal) => {
    if (!text.trim()) return text;
    const result = await engine.generate(modelId, [
      { role: "system", content: `You translate ${name(from)} into ${name(to)}. Reply with the translation only, no notes.` },
      { role: "user", content: text },
    ], { temperature: 0, maxTokens: Math.max(32, text.length * 2), local: true, cacheScope: `translation:${randomUUID()}`, ...(signal ? { signal } : {}) });
    return result.text;
  };
}

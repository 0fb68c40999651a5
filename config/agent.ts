/** `kiln agent`'s options: its table, its typed config, and the rules between its options. */
import { cpus, hostname, totalmem } from "node:os";
import { z } from "zod";
import { ConfigError } from "../core/errors.js";
import { defaultThreads } from "../core/cpu.js";
import { isLoopback } from "../core/net.js";
import { GPU_KINDS } from "../core/prebuilt.js";
import { SPEECH_MODELS } from "../models/speech.js";
import { WhisperCatalog } from "../models/whisper.js";
import { NODE_ID, NODE_ID_RULE } from "./node-tokens.js";
import { optionName, parseWith, type OptionSpec, type Parsed, type Raw } from "./option-table.js";
import { drainSeconds, hfToken, hubUrl, logLevel } from "./shared-options.js";
import { loadWhisperCatalog } from "./whisper-catalog.js";
import { bearerSecret, bool, bytes, duration, hostPortList, int, modelRef, serveSpec, sizeOrShare, speculativeSpec } from "./values.js";

/** Options of `kiln agent` (and the agent half of `kiln dev`). */
export const AGENT_OPTIONS = {
  /** The schedulers' gRPC addresses, comma-separated: the agent keeps a link to each. Default: none (a transcription-only instance). */
  scheduler: {
    flags: "--scheduler <host:port,…>",
    env: "KILN_SCHEDULER",
    description:
      "the gRPC address of the scheduler to dial, or several comma-separated: the agent keeps a link to each and serves them all (none: a transcription-only instance); plaintext only on loopback unless --grpc-insecure",
    schema: hostPortList.optional(),
  },
  /** PEM CA that verifies the scheduler's certificate: dial with TLS. Default: none (plaintext, loopback only). */
  schedulerCa: {
    flags: "--scheduler-ca <file>",
    env: "KILN_SCHEDULER_CA",
    description: "PEM CA that verifies the scheduler's certificate: dial with TLS (default: none, plaintext, loopback only)",
    schema: z.string().min(1).optional(),
  },
  /** PEM client certificate (chain) for mutual TLS; needs `--tls-key` and `--scheduler-ca`. Default: none. */
  tlsCert: {
    flags: "--tls-cert <file>",
    env: "KILN_TLS_CERT",
    description: "PEM client certificate (chain) presented to the scheduler (mutual TLS), with --tls-key and --scheduler-ca (default: none)",
    schema: z.string().min(1).optional(),
  },
  /** PEM private key of `--tls-cert`. Default: none. */
  tlsKey: { flags: "--tls-key <file>", env: "KILN_TLS_KEY", description: "PEM private key of --tls-cert (default: none)", schema: z.string().min(1).optional() },
  /** Dial a non-loopback `--scheduler` in plaintext anyway. Default: off. */
  grpcInsecure: {
    flags: "--grpc-insecure",
    env: "KILN_GRPC_INSECURE",
    description: "dial a non-loopback --scheduler in plaintext anyway; warned at every start (default: off)",
    schema: bool,
  },
  nodeToken: {
    flags: "--node-token <token>",
    env: "KILN_NODE_TOKEN",
    secret: true,
    description: "token presented to the scheduler (required with --scheduler)",
    schema: bearerSecret.optional(),
  },
  nodeId: {
    flags: "--node-id <id>",
    env: "KILN_NODE_ID",
    default: hostname(),
    description: `this node's name in the fleet (${NODE_ID_RULE})`,
    schema: z.string().regex(NODE_ID, `expected ${NODE_ID_RULE}`),
  },
  serve: {
    flags: "--serve <id=gguf>",
    env: "KILN_SERVE",
    repeatable: true,
    description: "serve a catalog model id from a GGUF file (repeatable; comma-separated in the env)",
    schema: z.array(serveSpec),
  },
  /**
   * Speculative decoding for a `--serve` id: `ID=lookup` (prompt lookup: the tokens that followed the
   * last generated ones where they occur in the prompt) or `ID=draft:GGUF` (a smaller model with the
   * same vocabulary drafts ahead; a path, or `hf:…` pulled into --models-dir like --serve's). Greedy
   * output is unchanged; it goes off by itself while too few predictions are accepted. Repeatable.
   * Default: none.
   */
  speculative: {
    flags: "--speculative <id=lookup|id=draft:gguf>",
    env: "KILN_SPECULATIVE",
    repeatable: true,
    description: "speculative decoding for a --serve id: ID=lookup (prompt lookup) or ID=draft:GGUF (a draft model, a path or hf:…) (repeatable; default: none)",
    schema: z.array(speculativeSpec),
  },
  /**
   * The most memory a placeable agent (one started without --serve, with --scheduler) offers the
   * scheduler's replicas, all devices together: its GPUs' memory, or on a CPU node its system memory.
   * Default: all of the GPUs' memory, or three quarters of the system memory on a CPU node.
   */
  memoryBudget: {
    flags: "--memory-budget <size>",
    env: "KILN_MEMORY_BUDGET",
    description: "most memory an agent without --serve offers the scheduler's replicas, all devices together (e.g. 24gb; default: all GPU memory, or 3/4 of the RAM on a CPU node)",
    schema: bytes
      .pipe(
        z
          .number()
          .int()
          .min(1024 ** 2, "must be at least 1mb"),
      )
      .optional(),
  },
  /** Where `--serve ID=hf:…` and `kiln models pull hf:…` put GGUF files. Default: .kiln/models. */
  modelsDir: {
    flags: "--models-dir <dir>",
    env: "KILN_MODELS_DIR",
    default: ".kiln/models",
    description: "folder GGUF files are pulled into (--serve ID=hf:…, kiln models pull hf:…)",
    schema: z.string().min(1),
  },
  hubUrl,
  hfToken,
  /** Never download: a job for a whisper model that is not installed is a 400. Default: off. */
  offline: {
    flags: "--offline",
    env: "KILN_OFFLINE",
    description: "never download models: a job naming a whisper model that is not installed is refused (default: off, the instance fetches it)",
    schema: bool,
  },
  /** Models fetched at start, in the background (`whisper:small,hf:org/repo/file.gguf`). Default: none. */
  pull: {
    flags: "--pull <refs>",
    env: "KILN_PULL",
    repeatable: true,
    description: "models to fetch at start, in the background: whisper:<name>, speech:<name> or hf:… references (repeatable; comma-separated)",
    schema: z
      .array(z.string())
      .transform((list) => list.flatMap((s) => s.split(",")).filter((s) => s.trim()))
      .pipe(z.array(modelRef)),
  },
  /** The whisper models a job may have this instance download (the others must be installed). Default: every catalog model. */
  fetchModels: {
    flags: "--fetch-models <names>",
    env: "KILN_FETCH_MODELS",
    repeatable: true,
    description: "whisper models a job may have this instance download when they are not installed, comma-separated (default: every catalog model; --offline: none)",
    schema: z.array(z.string().min(1)),
  },
  /** Whisper catalog entries added to (or replacing) the built-in ones. Default: none. */
  whisperCatalog: {
    flags: "--whisper-catalog <file>",
    env: "KILN_WHISPER_CATALOG",
    description: 'JSON array of whisper models to add or override: {"name", "repo", "file", "sha256", "size_bytes", "languages", "revision"?} (default: the built-in catalog)',
    schema: z
      .string()
      .min(1)
      .optional()
      .transform((file, ctx) => {
        if (file === undefined) return WhisperCatalog.builtin;
        try {
          return loadWhisperCatalog(file);
        } catch (err) {
          ctx.addIssue({ code: "custom", message: (err as Error).message });
          return z.NEVER;
        }
      }),
  },
  sequences: { flags: "--sequences <n>", env: "KILN_SEQUENCES", default: "4", description: "parallel sequences (slots) per loaded model", schema: int(1, 256) },
  contextSize: {
    flags: "--context-size <tokens>",
    env: "KILN_CONTEXT_SIZE",
    default: "4096",
    description: "context tokens per sequence (capped at the model's trained size)",
    schema: int(64, 1_048_576),
  },
  streamInterval: {
    flags: "--stream-interval <ms>",
    env: "KILN_STREAM_INTERVAL",
    default: "50",
    description: "longest generated text waits to share a wire message with the next pieces (0: a message per piece)",
    schema: int(0, 1000),
  },
  threads: {
    flags: "--threads <n>",
    env: "KILN_THREADS",
    default: String(defaultThreads()),
    description: "compute threads (default: every physical core with Kiln's shared-threadpool CPU backend installed, else one fewer)",
    schema: int(1, 1024),
  },
  batchSize: { flags: "--batch-size <tokens>", env: "KILN_BATCH_SIZE", description: "tokens evaluated per batch (default: node-llama-cpp's)", schema: int(1, 65_536).optional() },
  gpu: { flags: "--gpu <kind>", env: "KILN_GPU", default: "auto", description: `compute backend (${GPU_KINDS.join(", ")}); auto falls back to CPU`, schema: z.enum(GPU_KINDS) },
  host: { flags: "--host <host>", env: "KILN_HOST", default: "0.0.0.0", description: "address of the transcription API and web UI", schema: z.string().min(1) },
  port: { flags: "--port <port>", env: "KILN_PORT", default: "7860", description: "port of the transcription API and web UI (0 picks one)", schema: int(0, 65535) },
  /** Every `/api/*` call, `/readyz` and `/metrics` need `Authorization: Bearer <token>` (a job's own calls also take its handle). Required off loopback. Default: none. */
  agentToken: {
    flags: "--agent-token <token>",
    env: "KILN_AGENT_TOKEN",
    secret: true,
    description:
      "every /api/* call, /readyz and /metrics need Authorization: Bearer <token> (a job's status, result and cancel also take the job's handle; /healthz stays open); required when --host is not loopback, unless --agent-insecure (default: none)",
    schema: bearerSecret.optional(),
  },
  /** Serve a non-loopback `--host` without `--agent-token` anyway. Default: off. */
  agentInsecure: {
    flags: "--agent-insecure",
    env: "KILN_AGENT_INSECURE",
    description: "serve the transcription API on a non-loopback --host without --agent-token anyway; warned at every start (default: off)",
    schema: bool,
  },
  dataDir: { flags: "--data-dir <dir>", env: "KILN_DATA_DIR", default: ".kiln/agent", description: "job database, uploads and results", schema: z.string().min(1) },
  whisperDir: {
    flags: "--whisper-dir <dir>",
    env: "KILN_WHISPER_DIR",
    default: ".kiln/whisper",
    description: "folder of the whisper catalog's files (ggml-*.bin), where kiln models pull and on-demand downloads put them",
    schema: z.string().min(1),
  },
  vadModel: {
    flags: "--vad-model <file>",
    env: "KILN_VAD_MODEL",
    description: "Silero VAD ONNX model (default: silero_vad.onnx in --whisper-dir, where kiln models pull speech:silero-vad puts it)",
    schema: z.string().min(1).optional(),
  },
  segmentationModel: {
    flags: "--segmentation-model <file>",
    env: "KILN_SEGMENTATION_MODEL",
    description:
      "pyannote segmentation ONNX for speaker diarization (sherpa-onnx export; default: the one kiln models pull speech:pyannote-segmentation-3.0 puts in --whisper-dir, when the embedding model is there too)",
    schema: z.string().min(1).optional(),
  },
  embeddingModel: {
    flags: "--embedding-model <file>",
    env: "KILN_EMBEDDING_MODEL",
    description:
      "speaker-embedding ONNX for speaker diarization (wespeaker / 3d-speaker; default: the one kiln models pull speech:3dspeaker-eres2net-base puts in --whisper-dir, when the segmentation model is there too)",
    schema: z.string().min(1).optional(),
  },
  translationModel: {
    flags: "--translation-model <id>",
    env: "KILN_TRANSLATION_MODEL",
    description: "which --serve model translates transcripts into languages other than English (default: the first)",
    schema: z.string().min(1).optional(),
  },
  asrJobs: { flags: "--asr-jobs <n>", env: "KILN_ASR_JOBS", default: "1", description: "transcription jobs running at once", schema: int(1, 64) },
  asrQueue: { flags: "--asr-queue <n>", env: "KILN_ASR_QUEUE", default: "100", description: "transcription jobs that may wait (more is a 503)", schema: int(0) },
  asrParallel: {
    flags: "--asr-parallel <n>",
    env: "KILN_ASR_PARALLEL",
    default: String(Math.min(4, cpus().length)),
    description: "speech chunks decoded at once, each on its own whisper state (default: cores, at most 4)",
    schema: int(1, 64),
  },
  asrThreads: {
    flags: "--asr-threads <n>",
    env: "KILN_ASR_THREADS",
    default: String(cpus().length),
    description: "whisper compute threads in all, shared by the parallel decodes (default: cores)",
    schema: int(1, 1024),
  },
  whisperMemory: {
    flags: "--whisper-memory <size>",
    env: "KILN_WHISPER_MEMORY",
    default: `${Math.floor(totalmem() / 2 / 1024 ** 2)}mb`,
    description: "memory loaded whisper models may take, shared out among the --asr-jobs engine processes, before idle ones are unloaded (default: half the RAM)",
    schema: bytes.pipe(
      z
        .number()
        .int()
        .min(1024 ** 2, "must be at least 1mb"),
    ),
  },
  drainSeconds: drainSeconds("running completions may finish (queued transcription jobs resume at the next start)"),
  maxUpload: {
    flags: "--max-upload <size>",
    env: "KILN_MAX_UPLOAD",
    default: "1gb",
    description: "largest audio file accepted (413 above)",
    schema: bytes.pipe(z.number().int().min(1024, "must be at least 1kb")),
  },
  /** Bytes all uploads in flight may stage together, a size or a share of the free disk at start. Default: 50%. */
  uploadBudget: {
    flags: "--upload-budget <size|N%>",
    env: "KILN_UPLOAD_BUDGET",
    default: "50%",
    description:
      "bytes the uploads in flight may stage on disk together: a size, or a share of the data folder's free disk at start (507 past it, or when the disk itself runs low)",
    schema: sizeOrShare,
  },
  /** Uploads one client address may have in flight at once. Default: 2. */
  maxClientUploads: {
    flags: "--max-client-uploads <n>",
    env: "KILN_MAX_CLIENT_UPLOADS",
    default: "2",
    description: "uploads one client address may have in flight at once (429 past it)",
    schema: int(1, 1000),
  },
  /** How long finished jobs (row, result, files) are kept. Default: 7d. */
  resultTtl: {
    flags: "--result-ttl <duration>",
    env: "KILN_RESULT_TTL",
    default: "7d",
    description: "how long a finished job and its result are kept (like 12h or 7d)",
    schema: duration.pipe(z.number().int().min(60, "must be at least 60s")),
  },
  /** Finished jobs kept at most; the oldest go first. Default: 10000. */
  maxResults: { flags: "--max-results <n>", env: "KILN_MAX_RESULTS", default: "10000", description: "finished jobs kept at most (the oldest are removed first)", schema: int(1) },
  /** The ffmpeg that probes and decodes uploads. Default: the PATH's `ffmpeg`, else the npm-shipped static build. */
  ffmpeg: {
    flags: "--ffmpeg <path>",
    env: "KILN_FFMPEG",
    description: "the ffmpeg binary that decodes uploads, checked at start (default: the PATH's ffmpeg, else the static build from npm)",
    schema: z.string().min(1).optional(),
  },
  /** ffmpeg is killed when its output has not grown for this long. Default: 120. */
  ffmpegStallSeconds: {
    flags: "--ffmpeg-stall-seconds <s>",
    env: "KILN_FFMPEG_STALL_SECONDS",
    default: "120",
    description: "a decode whose output has not grown for this many seconds is killed and its job fails",
    schema: int(1, 86_400),
  },
  logLevel,
} satisfies Record<string, OptionSpec>;

export type AgentConfig = Parsed<typeof AGENT_OPTIONS>;

export function parseAgentConfig(raw: Raw): AgentConfig {
  const config = parseWith(AGENT_OPTIONS, raw);
  if (config.offline && config.pull.length > 0) throw new ConfigError(optionName(AGENT_OPTIONS.pull), "contradicts --offline (which never downloads): give one or the other");
  if (config.offline && config.fetchModels.length > 0)
    throw new ConfigError(optionName(AGENT_OPTIONS.fetchModels), "contradicts --offline (which never downloads): give one or the other");
  const unknown = config.fetchModels.filter((name) => !config.whisperCatalog.has(name));
  if (unknown.length > 0)
    throw new ConfigError(optionName(AGENT_OPTIONS.fetchModels), `${unknown.join(", ")} not in the whisper catalog (${config.whisperCatalog.names.join(", ")})`);
  for (const ref of config.pull) {
    if (ref.kind === "speech" && !SPEECH_MODELS.some((m) => m.name === ref.name)) {
      throw new ConfigError(optionName(AGENT_OPTIONS.pull), `speech:${ref.name} is not a speech model Kiln knows (${SPEECH_MODELS.map((m) => m.name).join(", ")})`);
    }
    if (ref.kind === "whisper" && !config.whisperCatalog.has(ref.name)) {
      throw new ConfigError(
        optionName(AGENT_OPTIONS.pull),
        `whisper:${ref.name} is not in the whisper catalog (${config.whisperCatalog.names.join(", ")}); --whisper-catalog adds entries`,
      );
    }
  }
  if (config.scheduler && !config.nodeToken) throw new ConfigError("--node-token / KILN_NODE_TOKEN", "is required with --scheduler");
  const o = AGENT_OPTIONS;
  if (config.tlsCert && !config.tlsKey) throw new ConfigError(optionName(o.tlsKey), "is required with --tls-cert");
  if (config.tlsKey && !config.tlsCert) throw new ConfigError(optionName(o.tlsCert), "is required with --tls-key");
  if (config.tlsCert && !config.schedulerCa) throw new ConfigError(optionName(o.schedulerCa), "is required with --tls-cert (a client certificate is presented over TLS)");
  if (config.grpcInsecure && config.schedulerCa) throw new ConfigError(optionName(o.grpcInsecure), "contradicts --scheduler-ca (give one or the other)");
  const remote = config.scheduler?.find((s) => !isLoopback(s.host));
  if (remote && !config.schedulerCa && !config.grpcInsecure) {
    throw new ConfigError(
      optionName(o.scheduler),
      `${remote.host} is not a loopback address, and the node token and prompts would cross the network in plaintext: pass --scheduler-ca to dial with TLS, or --grpc-insecure to dial plaintext anyway`,
    );
  }
  if (!config.agentToken && !config.agentInsecure && !isLoopback(config.host)) {
    throw new ConfigError(
      optionName(o.host),
      `${config.host} is reachable from other machines and no --agent-token is set: pass --agent-token (every /api call then needs it), --host 127.0.0.1 to serve this machine only, or --agent-insecure to serve without a token anyway`,
    );
  }
  if (config.agentToken && config.agentInsecure) throw new ConfigError(optionName(o.agentInsecure), "contradicts --agent-token (give one or the other)");
  if (Boolean(config.segmentationModel) !== Boolean(config.embeddingModel)) {
    throw new ConfigError(
      config.segmentationModel ? "--embedding-model / KILN_EMBEDDING_MODEL" : "--segmentation-model / KILN_SEGMENTATION_MODEL",
      "is required for speaker diarization (give both models)",
    );
  }
  const named = new Set<string>();
  for (const { id } of config.speculative) {
    if (!config.serve.some((s) => s.id === id)) throw new ConfigError(optionName(o.speculative), `"${id}" is not one of the --serve ids`);
    if (named.has(id)) throw new ConfigError(optionName(o.speculative), `"${id}" is named twice`);
    named.add(id);
  }
  if (config.translationModel && !config.serve.some((s) => s.id === config.translationModel)) {
    throw new ConfigError("--translation-model / KILN_TRANSLATION_MODEL", `"${config.translationModel}" is not one of the --serve ids`);
  }
  return config;
}

/**
 * Configuration, parsed and validated in one place.
 *
 * Every option is declared once below: its flag, its `KILN_*` environment twin, its default and
 * its validator. The CLI builds its flags from these declarations (flag beats env beats default),
 * then hands the raw strings to `parseSchedulerConfig` / `parseAgentConfig`, which return typed,
 * validated configs or throw a `ConfigError` naming the flag and its variable.
 */
import { cpus, hostname, totalmem } from "node:os";
import { z } from "zod";
import { ConfigError } from "../core/errors.js";
import { LOG_LEVELS } from "../core/log.js";
import { defaultThreads } from "../agent/llm/cpu-backend.js";

/** A listen or dial address. */
export interface HostPort {
  host: string;
  port: number;
}

export function formatHostPort({ host, port }: HostPort): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

const hostPort = z.string().transform((s, ctx): HostPort => {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(s.trim()) ?? /^()()(\d{1,5})$/.exec(s.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    ctx.addIssue({ code: "custom", message: `expected HOST:PORT (e.g. 127.0.0.1:8080), got "${s}"` });
    return z.NEVER;
  }
  return { host: m[1] ?? (m[2] || "127.0.0.1"), port };
});

const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.string().trim().regex(/^\d+$/, "expected a whole number").transform(Number).pipe(z.number().int().min(min).max(max));

const bytes = z.string().trim().transform((s, ctx) => {
  const m = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$/i.exec(s);
  if (!m) {
    ctx.addIssue({ code: "custom", message: `expected a size like 4mb or 1048576, got "${s}"` });
    return z.NEVER;
  }
  const unit = (m[2] ?? "b").toLowerCase();
  const scale = unit.startsWith("g") ? 1024 ** 3 : unit.startsWith("m") ? 1024 ** 2 : unit.startsWith("k") ? 1024 : 1;
  return Math.floor(Number(m[1]) * scale);
});

const list = z.string().transform((s) => s.split(",").map((t) => t.trim()).filter(Boolean));

/** `ID=PATH` pairs of `--serve`. */
const serveSpec = z.string().transform((s, ctx) => {
  const eq = s.indexOf("=");
  if (eq <= 0 || eq === s.length - 1) {
    ctx.addIssue({ code: "custom", message: `expected ID=GGUF (e.g. famB-v3.1=./model.gguf), got "${s}"` });
    return z.NEVER;
  }
  return { id: s.slice(0, eq), path: s.slice(eq + 1) };
});

const GPU_KINDS = ["auto", "cuda", "vulkan", "metal", "cpu"] as const;
export type GpuKind = (typeof GPU_KINDS)[number];

/** One declared option. `schema` receives the raw string (or list of strings when `repeatable`). */
export interface OptionSpec {
  /** Commander flag syntax, e.g. `--http <host:port>`. */
  flags: string;
  env: string;
  description: string;
  default?: string;
  repeatable?: boolean;
  /** Secret values are masked in `--print-config` and never logged. */
  secret?: boolean;
  schema: z.ZodType;
}

/** The camel-case key commander derives from a spec's long flag (`--queue-timeout` → `queueTimeout`). */
export function optionKey(spec: OptionSpec): string {
  const long = /--([a-z0-9-]+)/.exec(spec.flags)?.[1] ?? "";
  return long.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

const logLevel = {
  flags: "--log-level <level>", env: "KILN_LOG_LEVEL", default: "info",
  description: `log level (${LOG_LEVELS.join(", ")})`, schema: z.enum(LOG_LEVELS),
} satisfies OptionSpec;

/** `--drain-seconds`: how long SIGTERM waits for work in flight before exiting. */
const drainSeconds = (what: string) => ({
  flags: "--drain-seconds <s>", env: "KILN_DRAIN_SECONDS", default: "30", description: `on SIGTERM, seconds ${what} before exit`, schema: int(0, 3600),
}) satisfies OptionSpec;

/** Options of `kiln scheduler` (and the scheduler half of `kiln dev`). */
export const SCHEDULER_OPTIONS = {
  http: { flags: "--http <host:port>", env: "KILN_HTTP", default: "127.0.0.1:8080", description: "address of the public HTTP API", schema: hostPort },
  grpc: { flags: "--grpc <host:port>", env: "KILN_GRPC", default: "127.0.0.1:50051", description: "address agents dial (gRPC)", schema: hostPort },
  db: { flags: "--db <file>", env: "KILN_DB", default: ".kiln/kiln.db", description: "SQLite database (keys, accounts, signing secret)", schema: z.string().min(1) },
  jwtSecret: { flags: "--jwt-secret <secret>", env: "KILN_JWT_SECRET", secret: true, description: "API-key signing secret (default: generated once and kept in the database)", schema: z.string().min(32, "must be at least 32 characters").optional() },
  nodeTokens: { flags: "--node-tokens <list>", env: "KILN_NODE_TOKENS", secret: true, description: "comma-separated tokens agents may present (at least one)", schema: list.pipe(z.array(z.string().min(16, "each token must be at least 16 characters")).min(1, "at least one token is required")) },
  queueSize: { flags: "--queue-size <n>", env: "KILN_QUEUE_SIZE", default: "256", description: "requests that may wait for a free slot", schema: int(0) },
  queueTimeout: { flags: "--queue-timeout <seconds>", env: "KILN_QUEUE_TIMEOUT", default: "30", description: "how long a request may wait for a slot before a 503", schema: int(1, 3600) },
  maxBody: { flags: "--max-body <size>", env: "KILN_MAX_BODY", default: "4mb", description: "largest accepted JSON body (413 above)", schema: bytes.pipe(z.number().int().min(1024, "must be at least 1kb")) },
  standardRpm: { flags: "--standard-rpm <n>", env: "KILN_STANDARD_RPM", default: "100", description: "requests per minute of the standard tier (the spec gives none; free's by default)", schema: int(1) },
  heartbeatMs: { flags: "--heartbeat-ms <ms>", env: "KILN_HEARTBEAT_MS", default: "5000", description: "agent heartbeat interval; an agent silent for 3 intervals is dropped", schema: int(100, 600_000) },
  adminToken: { flags: "--admin-token <token>", env: "KILN_ADMIN_TOKEN", secret: true, description: "token that signs in to the dashboard at /dashboard (none: the dashboard API is off)", schema: z.string().min(16, "must be at least 16 characters").optional() },
  mcpTimeout: { flags: "--mcp-timeout <seconds>", env: "KILN_MCP_TIMEOUT", default: "10", description: "how long POST /v1/mcp/test waits for an MCP server", schema: int(1, 300) },
  drainSeconds: drainSeconds("requests in flight may finish"),
  logLevel,
} satisfies Record<string, OptionSpec>;

/** Options of `kiln agent` (and the agent half of `kiln dev`). */
export const AGENT_OPTIONS = {
  scheduler: { flags: "--scheduler <host:port>", env: "KILN_SCHEDULER", description: "the scheduler's gRPC address to dial (none: a transcription-only instance)", schema: hostPort.optional() },
  nodeToken: { flags: "--node-token <token>", env: "KILN_NODE_TOKEN", secret: true, description: "token presented to the scheduler (required with --scheduler)", schema: z.string().min(16, "must be at least 16 characters").optional() },
  nodeId: { flags: "--node-id <id>", env: "KILN_NODE_ID", default: hostname(), description: "this node's name in the fleet", schema: z.string().min(1).max(128) },
  serve: { flags: "--serve <id=gguf>", env: "KILN_SERVE", repeatable: true, description: "serve a catalog model id from a GGUF file (repeatable; comma-separated in the env)", schema: z.array(serveSpec) },
  sequences: { flags: "--sequences <n>", env: "KILN_SEQUENCES", default: "4", description: "parallel sequences (slots) per loaded model", schema: int(1, 256) },
  contextSize: { flags: "--context-size <tokens>", env: "KILN_CONTEXT_SIZE", default: "4096", description: "context tokens per sequence (capped at the model's trained size)", schema: int(64, 1_048_576) },
  streamInterval: { flags: "--stream-interval <ms>", env: "KILN_STREAM_INTERVAL", default: "50", description: "longest generated text waits to share a wire message with the next pieces (0: a message per piece)", schema: int(0, 1000) },
  threads: { flags: "--threads <n>", env: "KILN_THREADS", default: String(defaultThreads()), description: "compute threads (default: every physical core with Kiln's shared-threadpool CPU backend installed, else one fewer)", schema: int(1, 1024) },
  batchSize: { flags: "--batch-size <tokens>", env: "KILN_BATCH_SIZE", description: "tokens evaluated per batch (default: node-llama-cpp's)", schema: int(1, 65_536).optional() },
  gpu: { flags: "--gpu <kind>", env: "KILN_GPU", default: "auto", description: `compute backend (${GPU_KINDS.join(", ")}); auto falls back to CPU`, schema: z.enum(GPU_KINDS) },
  host: { flags: "--host <host>", env: "KILN_HOST", default: "0.0.0.0", description: "address of the transcription API and web UI", schema: z.string().min(1) },
  port: { flags: "--port <port>", env: "KILN_PORT", default: "7860", description: "port of the transcription API and web UI (0 picks one)", schema: int(0, 65535) },
  agentToken: { flags: "--agent-token <token>", env: "KILN_AGENT_TOKEN", secret: true, description: "when set, every /api/* call needs Authorization: Bearer <token>", schema: z.string().min(1).optional() },
  dataDir: { flags: "--data-dir <dir>", env: "KILN_DATA_DIR", default: ".kiln/agent", description: "job database, uploads and results", schema: z.string().min(1) },
  whisperDir: { flags: "--whisper-dir <dir>", env: "KILN_WHISPER_DIR", default: ".kiln/whisper", description: "folder of ggml-<name>.bin whisper models", schema: z.string().min(1) },
  vadModel: { flags: "--vad-model <file>", env: "KILN_VAD_MODEL", description: "Silero VAD ONNX model (default: silero_vad.onnx in --whisper-dir)", schema: z.string().min(1).optional() },
  segmentationModel: { flags: "--segmentation-model <file>", env: "KILN_SEGMENTATION_MODEL", description: "pyannote segmentation ONNX for speaker diarization (sherpa-onnx export)", schema: z.string().min(1).optional() },
  embeddingModel: { flags: "--embedding-model <file>", env: "KILN_EMBEDDING_MODEL", description: "speaker-embedding ONNX for speaker diarization (wespeaker / 3d-speaker)", schema: z.string().min(1).optional() },
  translationModel: { flags: "--translation-model <id>", env: "KILN_TRANSLATION_MODEL", description: "which --serve model translates transcripts into languages other than English (default: the first)", schema: z.string().min(1).optional() },
  asrJobs: { flags: "--asr-jobs <n>", env: "KILN_ASR_JOBS", default: "1", description: "transcription jobs running at once", schema: int(1, 64) },
  asrQueue: { flags: "--asr-queue <n>", env: "KILN_ASR_QUEUE", default: "100", description: "transcription jobs that may wait (more is a 503)", schema: int(0) },
  asrParallel: { flags: "--asr-parallel <n>", env: "KILN_ASR_PARALLEL", default: String(Math.min(4, cpus().length)), description: "speech chunks decoded at once, each on its own whisper state (default: cores, at most 4)", schema: int(1, 64) },
  asrThreads: { flags: "--asr-threads <n>", env: "KILN_ASR_THREADS", default: String(cpus().length), description: "whisper compute threads in all, shared by the parallel decodes (default: cores)", schema: int(1, 1024) },
  whisperMemory: { flags: "--whisper-memory <size>", env: "KILN_WHISPER_MEMORY", default: `${Math.floor(totalmem() / 2 / 1024 ** 2)}mb`, description: "memory loaded whisper models may take before idle ones are unloaded (default: half the RAM)", schema: bytes.pipe(z.number().int().min(1024 ** 2, "must be at least 1mb")) },
  drainSeconds: drainSeconds("running completions may finish (queued transcription jobs resume at the next start)"),
  maxUpload: { flags: "--max-upload <size>", env: "KILN_MAX_UPLOAD", default: "1gb", description: "largest audio file accepted (413 above)", schema: bytes.pipe(z.number().int().min(1024, "must be at least 1kb")) },
  logLevel,
} satisfies Record<string, OptionSpec>;

type Raw = Record<string, string | string[] | undefined>;
type Parsed<T extends Record<string, OptionSpec>> = { [K in keyof T]: z.output<T[K]["schema"]> };

function parseWith<T extends Record<string, OptionSpec>>(specs: T, raw: Raw, required: (keyof T)[] = []): Parsed<T> {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(specs)) {
    let value = raw[key] ?? spec.default;
    if (spec.repeatable) value = value === undefined ? [] : Array.isArray(value) ? value : value.split(",").filter(Boolean);
    const name = `${spec.flags.split(" ")[0]} / ${spec.env}`;
    if (value === undefined && required.includes(key)) throw new ConfigError(name, "is required");
    const result = spec.schema.safeParse(value);
    if (!result.success) throw new ConfigError(name, result.error.issues.map((i) => i.message).join("; "));
    out[key] = result.data;
  }
  return out as Parsed<T>;
}

export type SchedulerConfig = Parsed<typeof SCHEDULER_OPTIONS>;
export type AgentConfig = Parsed<typeof AGENT_OPTIONS>;

export function parseSchedulerConfig(raw: Raw): SchedulerConfig {
  return parseWith(SCHEDULER_OPTIONS, raw, ["nodeTokens"]);
}

export function parseAgentConfig(raw: Raw): AgentConfig {
  const config = parseWith(AGENT_OPTIONS, raw);
  if (config.scheduler && !config.nodeToken) throw new ConfigError("--node-token / KILN_NODE_TOKEN", "is required with --scheduler");
  if (Boolean(config.segmentationModel) !== Boolean(config.embeddingModel)) {
    throw new ConfigError(config.segmentationModel ? "--embedding-model / KILN_EMBEDDING_MODEL" : "--segmentation-model / KILN_SEGMENTATION_MODEL", "is required for speaker diarization (give both models)");
  }
  if (config.translationModel && !config.serve.some((s) => s.id === config.translationModel)) {
    throw new ConfigError("--translation-model / KILN_TRANSLATION_MODEL", `"${config.translationModel}" is not one of the --serve ids`);
  }
  return config;
}

/** The effective configuration with every secret masked, for `--print-config` and start-up logs. */
export function maskSecrets(specs: Record<string, OptionSpec>, config: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, specs[k]?.secret && v !== undefined ? "[redacted]" : v]));
}

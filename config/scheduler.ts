/** `kiln scheduler`'s options: its table, its typed config, and the rules between its options. */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { ConfigError } from "../core/errors.js";
import { isLoopback } from "../core/net.js";
import type { Tier } from "../core/tiers.js";
import { nodeTokens } from "./node-tokens.js";
import { optionName, parseWith, type OptionSpec, type Parsed, type Raw } from "./option-table.js";
import { drainSeconds, hfToken, hubUrl, logLevel } from "./shared-options.js";
import { loadStdioCatalog } from "./stdio-catalog.js";
import { parseOperatorCatalog, type OperatorCatalog } from "../models/operator-catalog.js";
import { bearerSecret, bool, bytes, cidr, corsOrigin, duration, hostPort, int, tierCaps } from "./values.js";

/** `--max-inflight`'s default: chat completions an account may have in flight (queued or generating), by tier. */
export const DEFAULT_MAX_INFLIGHT: Readonly<Record<Tier, number>> = { free: 4, standard: 16, pro: 64, enterprise: 256 };

/** Tokens per minute and per day by tier (0: no quota): the free tier's only, by default. */
export const DEFAULT_TOKENS_PER_MINUTE: Readonly<Record<Tier, number>> = { free: 200_000, standard: 0, pro: 0, enterprise: 0 };
export const DEFAULT_TOKENS_PER_DAY: Readonly<Record<Tier, number>> = { free: 2_000_000, standard: 0, pro: 0, enterprise: 0 };

/** Seconds of audio an account may have transcribed per minute and per day, by tier (0: no quota). */
export const DEFAULT_AUDIO_SECONDS_PER_MINUTE: Readonly<Record<Tier, number>> = { free: 600, standard: 3600, pro: 14_400, enterprise: 0 };
export const DEFAULT_AUDIO_SECONDS_PER_DAY: Readonly<Record<Tier, number>> = { free: 3600, standard: 36_000, pro: 360_000, enterprise: 0 };

/** Reads the operator's model catalog file (models/operator-catalog.ts); throws an Error naming the file, then the entry and the field. */
export function loadOperatorCatalog(file: string): OperatorCatalog {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
  try {
    return parseOperatorCatalog(json);
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
}

/** Options of `kiln scheduler` (and the scheduler half of `kiln dev`). */
export const SCHEDULER_OPTIONS = {
  http: { flags: "--http <host:port>", env: "KILN_HTTP", default: "127.0.0.1:8080", description: "address of the public HTTP API", schema: hostPort },
  grpc: {
    flags: "--grpc <host:port>",
    env: "KILN_GRPC",
    default: "127.0.0.1:50051",
    description: "address agents dial (gRPC); plaintext only on loopback unless --grpc-insecure",
    schema: hostPort,
  },
  /** PEM certificate (chain) the gRPC port serves TLS with; needs `--grpc-tls-key`. Default: none (plaintext, loopback only). */
  grpcTlsCert: {
    flags: "--grpc-tls-cert <file>",
    env: "KILN_GRPC_TLS_CERT",
    description: "PEM certificate (chain) for TLS on the gRPC port, with --grpc-tls-key (default: none, plaintext, loopback only)",
    schema: z.string().min(1).optional(),
  },
  /** PEM private key of `--grpc-tls-cert`. Default: none. */
  grpcTlsKey: { flags: "--grpc-tls-key <file>", env: "KILN_GRPC_TLS_KEY", description: "PEM private key of --grpc-tls-cert (default: none)", schema: z.string().min(1).optional() },
  /** PEM CA bundle: with it, agents must present a client certificate it signed (mutual TLS). Default: none (no client certificate asked). */
  grpcClientCa: {
    flags: "--grpc-client-ca <file>",
    env: "KILN_GRPC_CLIENT_CA",
    description: "PEM CA that must have signed every agent's client certificate: mutual TLS, needs --grpc-tls-cert (default: none, no client certificate asked)",
    schema: z.string().min(1).optional(),
  },
  /** Serve plaintext gRPC on a non-loopback `--grpc` address anyway. Default: off. */
  grpcInsecure: {
    flags: "--grpc-insecure",
    env: "KILN_GRPC_INSECURE",
    description: "serve plaintext gRPC on a non-loopback --grpc address anyway; warned at every start (default: off)",
    schema: bool,
  },
  /** A SQLite file, or a `postgres://` URL several schedulers share. Default `.kiln/kiln.db`. */
  db: {
    flags: "--db <file|url>",
    env: "KILN_DB",
    default: ".kiln/kiln.db",
    description: "the database of accounts, keys, MCP configurations and usage: a SQLite file, or postgres://[user[:password]@]host[:port]/database that several schedulers share",
    schema: z.string().min(1),
  },
  /** Connections each scheduler opens to a PostgreSQL --db. Default 10. */
  dbPool: {
    flags: "--db-pool <n>",
    env: "KILN_DB_POOL",
    default: "10",
    description: "connections this scheduler keeps to a PostgreSQL --db (ignored for SQLite)",
    schema: int(1, 1000),
  },
  jwtSecret: {
    flags: "--jwt-secret <secret>",
    env: "KILN_JWT_SECRET",
    secret: true,
    description: "API-key signing secret (default: generated once and kept in the database)",
    schema: z.string().min(32, "must be at least 32 characters").optional(),
  },
  /** Comma-separated `TOKEN` (any node id) or `IDS=TOKEN` entries (IDS: node ids or `*` globs joined by `|`). Required. */
  nodeTokens: {
    flags: "--node-tokens <list>",
    env: "KILN_NODE_TOKENS",
    secret: true,
    description:
      "comma-separated tokens agents may present (at least one): TOKEN registers any node id, IDS=TOKEN only the node ids or * globs in IDS, joined by | (e.g. gpu-1|gpu-2=tokA,gpu-*=tokB,tokC); IDS;models:M1|M2;slots:N=TOKEN also limits the models (ids or * globs) and the slots its nodes may offer",
    schema: nodeTokens,
  },
  /** Most slots a node may register (its pools together; its transcription slots apart) when its token names none. Default 64. */
  maxNodeSlots: {
    flags: "--max-node-slots <n>",
    env: "KILN_MAX_NODE_SLOTS",
    default: "64",
    description: "most slots a node may register, its chat pools together (its transcription slots apart), unless its --node-tokens entry names slots: more is refused at Register",
    schema: int(1, 65_536),
  },
  queueSize: { flags: "--queue-size <n>", env: "KILN_QUEUE_SIZE", default: "256", description: "requests that may wait for a free slot", schema: int(0) },
  queueTimeout: {
    flags: "--queue-timeout <seconds>",
    env: "KILN_QUEUE_TIMEOUT",
    default: "30",
    description: "how long a request may wait for a slot before a 503",
    schema: int(1, 3600),
  },
  maxBody: {
    flags: "--max-body <size>",
    env: "KILN_MAX_BODY",
    default: "4mb",
    description: "largest accepted JSON body (413 above)",
    schema: bytes.pipe(z.number().int().min(1024, "must be at least 1kb")),
  },
  /** Redis shared by the schedulers for the fair-use counts (`redis://host:port`). Default: none (counted in this process). */
  redis: {
    flags: "--redis <url>",
    env: "KILN_REDIS",
    secret: true,
    description:
      "Redis URL (redis://[user:password@]host:port[/db]) where every scheduler counts requests per minute, requests in flight and token quotas together (default: none, counted in this process)",
    schema: z
      .string()
      .regex(/^rediss?:\/\/\S+$/, "expected redis://host:port or rediss://host:port")
      .optional(),
  },
  /** Largest `file` of `POST /v1/audio/*`. Default 1gb (the spec's limit). */
  maxAudioUpload: {
    flags: "--max-audio-upload <size>",
    env: "KILN_MAX_AUDIO_UPLOAD",
    default: "1gb",
    description: "largest file of POST /v1/audio/transcriptions and /translations (413 above, while it streams)",
    schema: bytes.pipe(z.number().int().min(1024, "must be at least 1kb")),
  },
  /** Folder holding `/v1/audio` uploads while they run (each removed when its request ends). Default `.kiln/spool`. */
  spoolDir: {
    flags: "--spool-dir <dir>",
    env: "KILN_SPOOL_DIR",
    default: ".kiln/spool",
    description: "folder holding /v1/audio uploads while their requests run",
    schema: z.string().min(1),
  },
  /** Free disk the spool leaves: asked before each upload and every 4 MiB of it (507 below). Default 512mb. */
  spoolMinFree: {
    flags: "--spool-min-free <size>",
    env: "KILN_SPOOL_MIN_FREE",
    default: "512mb",
    description: "free disk /v1/audio uploads leave on the spool's file system, asked before each upload and every 4 MiB of it (507 insufficient_storage below)",
    schema: bytes.pipe(z.number().int().min(0)),
  },
  /** `/v1/audio` uploads this scheduler holds at once. Default 16. */
  audioUploads: {
    flags: "--audio-uploads <n>",
    env: "KILN_AUDIO_UPLOADS",
    default: "16",
    description: "/v1/audio uploads this scheduler holds at once, all accounts together (503 uploads_busy beyond)",
    schema: int(1, 10_000),
  },
  /** `/v1/audio` requests one account may have in flight at once. Default 4. */
  audioUploadsPerAccount: {
    flags: "--audio-uploads-per-account <n>",
    env: "KILN_AUDIO_UPLOADS_PER_ACCOUNT",
    default: "4",
    description: "/v1/audio requests one account may have in flight at once (429 beyond)",
    schema: int(1, 10_000),
  },
  /** `max_tokens` of a chat completion that gives none (0: what the context has left). Default 1024. */
  defaultMaxTokens: {
    flags: "--default-max-tokens <n>",
    env: "KILN_DEFAULT_MAX_TOKENS",
    default: "1024",
    description: "max_tokens of a chat completion that gives none (0: up to the end of the context)",
    schema: int(0),
  },
  standardRpm: {
    flags: "--standard-rpm <n>",
    env: "KILN_STANDARD_RPM",
    default: "100",
    description: "requests per minute of the standard tier (the spec gives none; free's by default)",
    schema: int(1),
  },
  /** Per-tier cap on an account's chat completions in flight (queued or generating); more are a 429. Default `free=4,standard=16,pro=64,enterprise=256`. */
  maxInflight: {
    flags: "--max-inflight <list>",
    env: "KILN_MAX_INFLIGHT",
    default: Object.entries(DEFAULT_MAX_INFLIGHT)
      .map(([t, n]) => `${t}=${n}`)
      .join(","),
    description:
      "chat completions an account may have in flight (queued or generating), by tier: TIER=N pairs, comma-separated; a partial list changes only the tiers it names (more are a 429 too_many_requests_in_flight)",
    schema: tierCaps(DEFAULT_MAX_INFLIGHT),
  },
  /** Tokens (prompt and completion) an account may use per minute, by tier; 0: no quota. Default `free=200000,standard=0,pro=0,enterprise=0`. */
  tokensPerMinute: {
    flags: "--tokens-per-minute <list>",
    env: "KILN_TOKENS_PER_MINUTE",
    default: Object.entries(DEFAULT_TOKENS_PER_MINUTE)
      .map(([t, n]) => `${t}=${n}`)
      .join(","),
    description: "tokens (prompt and completion) an account may use in any 60 s, by tier: TIER=N pairs, 0 for no quota (beyond: 429 token_quota_exceeded)",
    schema: tierCaps(DEFAULT_TOKENS_PER_MINUTE, 0, 1_000_000_000),
  },
  /** Tokens an account may use per UTC day, by tier; 0: no quota. Default `free=2000000,standard=0,pro=0,enterprise=0`. */
  tokensPerDay: {
    flags: "--tokens-per-day <list>",
    env: "KILN_TOKENS_PER_DAY",
    default: Object.entries(DEFAULT_TOKENS_PER_DAY)
      .map(([t, n]) => `${t}=${n}`)
      .join(","),
    description: "tokens an account may use per UTC day, by tier: TIER=N pairs, 0 for no quota (counted from the usage ledger, so a restart forgets nothing)",
    schema: tierCaps(DEFAULT_TOKENS_PER_DAY, 0, 1_000_000_000_000),
  },
  /** Seconds of audio an account may have transcribed in any 60 s, by tier; 0: no quota. Default `free=600,standard=3600,pro=14400,enterprise=0`. */
  audioSecondsPerMinute: {
    flags: "--audio-seconds-per-minute <list>",
    env: "KILN_AUDIO_SECONDS_PER_MINUTE",
    default: Object.entries(DEFAULT_AUDIO_SECONDS_PER_MINUTE)
      .map(([t, n]) => `${t}=${n}`)
      .join(","),
    description:
      "seconds of audio an account may have transcribed (/v1/audio) in any 60 s, by tier: TIER=N pairs, 0 for no quota (beyond: 429 audio_quota_exceeded; the request that crosses it is served whole)",
    schema: tierCaps(DEFAULT_AUDIO_SECONDS_PER_MINUTE, 0, 1_000_000_000),
  },
  /** Seconds of audio an account may have transcribed per UTC day, by tier; 0: no quota. Default `free=3600,standard=36000,pro=360000,enterprise=0`. */
  audioSecondsPerDay: {
    flags: "--audio-seconds-per-day <list>",
    env: "KILN_AUDIO_SECONDS_PER_DAY",
    default: Object.entries(DEFAULT_AUDIO_SECONDS_PER_DAY)
      .map(([t, n]) => `${t}=${n}`)
      .join(","),
    description: "seconds of audio an account may have transcribed per UTC day, by tier: TIER=N pairs, 0 for no quota (counted from the usage ledger)",
    schema: tierCaps(DEFAULT_AUDIO_SECONDS_PER_DAY, 0, 1_000_000_000_000),
  },
  heartbeatMs: {
    flags: "--heartbeat-ms <ms>",
    env: "KILN_HEARTBEAT_MS",
    default: "5000",
    description: "agent heartbeat interval; an agent silent for 3 intervals is dropped",
    schema: int(100, 600_000),
  },
  /** Prometheus counters per account (`kiln_account_*`), served only to a scrape with `--metrics-token`. Default: off (one series per account). */
  metricsPerAccount: {
    flags: "--metrics-per-account",
    env: "KILN_METRICS_PER_ACCOUNT",
    description:
      "export Prometheus counters per account (kiln_account_requests_total, kiln_account_tokens_total, kiln_account_audio_seconds_total) to a /metrics scrape that sends --metrics-token; needs it (default: off)",
    schema: bool,
  },
  /** Bearer token a `/metrics` scrape sends to get the per-account series too. Required with `--metrics-per-account`. Default: none. */
  metricsToken: {
    flags: "--metrics-token <token>",
    env: "KILN_METRICS_TOKEN",
    secret: true,
    description:
      "a /metrics scrape sending Authorization: Bearer <token> also gets the per-account series (a wrong token is a 401; none gets the fleet-wide series); required with --metrics-per-account (default: none)",
    schema: bearerSecret.optional(),
  },
  /** Browser origins allowed to call `/v1` (CORS), or `*`. Default none: no CORS headers, browsers keep to same-origin. */
  corsOrigin: {
    flags: "--cors-origin <origin>",
    env: "KILN_CORS_ORIGIN",
    repeatable: true,
    description:
      "a browser origin allowed to call /v1 (CORS), such as https://app.example.com, or * for any (repeatable; comma-separated in the env; default none: no cross-origin access)",
    schema: z.array(corsOrigin),
  },
  adminToken: {
    flags: "--admin-token <token>",
    env: "KILN_ADMIN_TOKEN",
    secret: true,
    description: "token that signs in to the dashboard at /dashboard (none: the dashboard API is off)",
    schema: z.string().min(16, "must be at least 16 characters").optional(),
  },
  hubUrl,
  hfToken,
  /**
   * The operator's model catalog, a JSON file (`{"models": [{id, source, aliases, …}]}`, models/operator-catalog.ts),
   * read and checked at start; it replaces the catalog stored in the database, which every scheduler sharing it
   * then serves. Default: none (the stored catalog, if the dashboard or another scheduler wrote one; else the
   * eight built-in ids and the agents' `--serve`).
   */
  catalog: {
    flags: "--catalog <file>",
    env: "KILN_CATALOG",
    description:
      'JSON catalog of the chat models the API accepts ({"models": [{id, source, aliases, context_size, sequences, min_replicas, max_replicas, idle_unload_s}]}); it replaces the catalog stored in --db, shared by every scheduler on it (default: none, the stored catalog, else the eight built-in ids)',
    schema: z
      .string()
      .min(1)
      .optional()
      .transform((file, ctx) => {
        if (file === undefined) return undefined;
        try {
          return loadOperatorCatalog(file);
        } catch (err) {
          ctx.addIssue({ code: "custom", message: (err as Error).message });
          return z.NEVER;
        }
      }),
  },
  mcpTimeout: { flags: "--mcp-timeout <seconds>", env: "KILN_MCP_TIMEOUT", default: "10", description: "how long POST /v1/mcp/test waits for an MCP server", schema: int(1, 300) },
  mcpConcurrency: {
    flags: "--mcp-concurrency <n>",
    env: "KILN_MCP_CONCURRENCY",
    default: "4",
    description: "MCP tests one account may run at once (429 beyond)",
    schema: int(1, 1000),
  },
  mcpTotalConcurrency: {
    flags: "--mcp-total-concurrency <n>",
    env: "KILN_MCP_TOTAL_CONCURRENCY",
    default: "32",
    description: "MCP tests all accounts together may run at once (503 mcp_busy beyond)",
    schema: int(1, 10_000),
  },
  mcpSandboxMemory: {
    flags: "--mcp-sandbox-memory <size>",
    env: "KILN_MCP_SANDBOX_MEMORY",
    default: "256mb",
    description: "memory each MCP test's sandbox process may reach before it is stopped (502 mcp_answer_too_large)",
    schema: bytes.pipe(
      z
        .number()
        .int()
        .min(96 * 1024 ** 2, "must be at least 96mb"),
    ),
  },
  mcpReadLimit: {
    flags: "--mcp-read-limit <size>",
    env: "KILN_MCP_READ_LIMIT",
    default: "32mb",
    description: "bytes one MCP test may read from the tenant's server, all connections together (502 mcp_answer_too_large beyond)",
    schema: bytes.pipe(
      z
        .number()
        .int()
        .min(1024 ** 2, "must be at least 1mb"),
    ),
  },
  mcpAllowCidr: {
    flags: "--mcp-allow-cidr <cidr>",
    env: "KILN_MCP_ALLOW_CIDR",
    repeatable: true,
    description:
      "a range tenants' MCP configurations may reach although it is not public (repeatable; comma-separated in the env; default none: loopback, private, link-local and similar ranges are refused)",
    schema: z.array(cidr),
  },
  mcpFsBase: {
    flags: "--mcp-fs-base <dir>",
    env: "KILN_MCP_FS_BASE",
    description: "folder under which each account's filesystem MCP roots live, as <dir>/<account>/<root_path> (none: the filesystem type is refused)",
    schema: z.string().min(1).optional(),
  },
  mcpStdioServers: {
    flags: "--mcp-stdio-servers <file>",
    env: "KILN_MCP_STDIO_SERVERS",
    description: "JSON catalog of the stdio MCP servers tenants may pick by name (none: tenants can use MCP over HTTP only)",
    schema: z
      .string()
      .min(1)
      .optional()
      .transform((file, ctx) => {
        if (file === undefined) return {};
        try {
          return loadStdioCatalog(file);
        } catch (err) {
          ctx.addIssue({ code: "custom", message: (err as Error).message });
          return z.NEVER;
        }
      }),
  },
  secretsKey: {
    flags: "--secrets-key <key>",
    env: "KILN_SECRETS_KEY",
    secret: true,
    description: "32-byte key (hex or base64) that encrypts accounts' MCP secrets (default: a key file created beside --db with mode 0600)",
    schema: z.string().min(1).optional(),
  },
  /** A connection whose client owes bytes and sends none for this long is closed. Default 60s. */
  idleTimeout: {
    flags: "--idle-timeout <duration>",
    env: "KILN_IDLE_TIMEOUT",
    default: "60s",
    description:
      "an HTTP connection that sends nothing for this long while the scheduler waits on it (before or between requests, in its headers or body, or not reading an answer) is closed; a long answer the scheduler is making is never cut; a gRPC connection with no call open for this long is closed too (like 60s or 2m)",
    schema: duration.pipe(z.number().int().min(1, "must be at least 1s").max(86_400, "must be at most 1d")),
  },
  drainSeconds: drainSeconds("requests in flight may finish"),
  logLevel,
} satisfies Record<string, OptionSpec>;

export type SchedulerConfig = Parsed<typeof SCHEDULER_OPTIONS>;

export function parseSchedulerConfig(raw: Raw): SchedulerConfig {
  const config = parseWith(SCHEDULER_OPTIONS, raw, ["nodeTokens"]);
  const o = SCHEDULER_OPTIONS;
  if (config.grpcTlsCert && !config.grpcTlsKey) throw new ConfigError(optionName(o.grpcTlsKey), "is required with --grpc-tls-cert");
  if (config.grpcTlsKey && !config.grpcTlsCert) throw new ConfigError(optionName(o.grpcTlsCert), "is required with --grpc-tls-key");
  if (config.grpcClientCa && !config.grpcTlsCert) throw new ConfigError(optionName(o.grpcClientCa), "needs --grpc-tls-cert and --grpc-tls-key (mutual TLS runs over TLS)");
  if (config.grpcInsecure && config.grpcTlsCert) throw new ConfigError(optionName(o.grpcInsecure), "contradicts --grpc-tls-cert (give one or the other)");
  if (config.metricsPerAccount && !config.metricsToken) {
    throw new ConfigError(
      optionName(o.metricsPerAccount),
      "needs --metrics-token: the per-account series name every account and its usage, so /metrics serves them only to a scrape that sends that token",
    );
  }
  if (!config.grpcTlsCert && !config.grpcInsecure && !isLoopback(config.grpc.host)) {
    throw new ConfigError(
      optionName(o.grpc),
      `${config.grpc.host} is not a loopback address, and node tokens and prompts would cross the network in plaintext: pass --grpc-tls-cert and --grpc-tls-key to serve TLS, or --grpc-insecure to serve plaintext anyway`,
    );
  }
  return config;
}

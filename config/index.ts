/**
 * Configuration, parsed and validated in one place.
 *
 * Every option is declared once below: its flag, its `KILN_*` environment twin, its default and
 * its validator. The CLI builds its flags from these declarations (flag beats env beats default),
 * then hands the raw strings to `parseSchedulerConfig` / `parseAgentConfig`, which return typed,
 * validated configs or throw a `ConfigError` naming the flag and its variable.
 */
import { cpus, hostname, totalmem } from "node:os";
import ipaddr from "ipaddr.js";
import { z } from "zod";
import { ConfigError } from "../core/errors.js";
import { LOG_LEVELS } from "../core/log.js";
import { loadStdioCatalog } from "./stdio-catalog.js";
import { loadWhisperCatalog } from "./whisper-catalog.js";
import { WhisperCatalog } from "../models/whisper.js";
// refs.ts alone, not hub/index.ts: configuration is parsed by every command, and the downloader's imports are heavy
import { parseRef, type ModelRef } from "../hub/refs.js";

export type { StdioCatalog, StdioServerSpec } from "./stdio-catalog.js";
import { defaultThreads } from "../core/cpu.js";
import { TIERS, isTier, type Tier } from "../core/tiers.js";
import { formatHostPort, isLoopback, parseHostPort, withoutPassword, type HostPort } from "../core/net.js";
import { GPU_KINDS, type GpuKind } from "../core/prebuilt.js";

export { formatHostPort, isLoopback, type HostPort };

const hostPort = z.string().transform((s, ctx): HostPort => {
  const address = parseHostPort(s);
  if (!address) {
    ctx.addIssue({ code: "custom", message: `expected HOST:PORT (e.g. 127.0.0.1:8080), got "${s}"` });
    return z.NEVER;
  }
  return address;
});

/** One or more HOST:PORT, comma-separated, none twice. */
const hostPortList = z.string().transform((s, ctx): HostPort[] => {
  const addresses: HostPort[] = [];
  for (const part of s.split(",")) {
    const address = parseHostPort(part);
    if (!address) {
      ctx.addIssue({ code: "custom", message: `expected HOST:PORT, or several comma-separated (e.g. 10.0.0.1:50051,10.0.0.2:50051), got "${part.trim()}"` });
      return z.NEVER;
    }
    if (addresses.some((a) => a.host === address.host && a.port === address.port)) {
      ctx.addIssue({ code: "custom", message: `${formatHostPort(address)} is named twice` });
      return z.NEVER;
    }
    addresses.push(address);
  }
  return addresses;
});

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.string().trim().regex(/^\d+$/, "expected a whole number").transform(Number).pipe(z.number().int().min(min).max(max));

const bytes = z
  .string()
  .trim()
  .transform((s, ctx) => {
    const m = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$/i.exec(s);
    if (!m) {
      ctx.addIssue({ code: "custom", message: `expected a size like 4mb or 1048576, got "${s}"` });
      return z.NEVER;
    }
    const unit = (m[2] ?? "b").toLowerCase();
    const scale = unit.startsWith("g") ? 1024 ** 3 : unit.startsWith("m") ? 1024 ** 2 : unit.startsWith("k") ? 1024 : 1;
    return Math.floor(Number(m[1]) * scale);
  });

/** A duration: `90s`, `30m`, `12h`, `7d`, or bare seconds; in seconds. */
const duration = z
  .string()
  .trim()
  .transform((s, ctx) => {
    const m = /^(\d+)\s*(s|m|h|d)?$/i.exec(s);
    if (!m) {
      ctx.addIssue({ code: "custom", message: `expected a duration like 90s, 30m, 12h or 7d, got "${s}"` });
      return z.NEVER;
    }
    const unit = (m[2] ?? "s").toLowerCase();
    return Number(m[1]) * (unit === "d" ? 86_400 : unit === "h" ? 3600 : unit === "m" ? 60 : 1);
  });

/** A size (`20gb`) or a share of the free disk (`25%`). */
export type SizeOrShare = { bytes: number } | { share: number };
const sizeOrShare = z
  .string()
  .trim()
  .transform((s, ctx): SizeOrShare => {
    const pct = /^(\d+(?:\.\d+)?)\s*%$/.exec(s);
    if (pct) {
      const share = Number(pct[1]) / 100;
      if (share > 0 && share <= 1) return { share };
      ctx.addIssue({ code: "custom", message: `a share of the free disk must be above 0% and at most 100%, got "${s}"` });
      return z.NEVER;
    }
    const parsed = bytes.safeParse(s);
    if (!parsed.success || parsed.data < 1024 ** 2) {
      ctx.addIssue({ code: "custom", message: `expected a size of at least 1mb (like 20gb) or a share of the free disk (like 25%), got "${s}"` });
      return z.NEVER;
    }
    return { bytes: parsed.data };
  });

/** `*`, or an origin exactly as a browser sends it: scheme, host and port, no path. */
const corsOrigin = z
  .string()
  .trim()
  .refine(
    (o) => {
      if (o === "*") return true;
      try {
        const url = new URL(o);
        return (url.protocol === "https:" || url.protocol === "http:") && url.origin === o;
      } catch {
        return false;
      }
    },
    { message: "expected * or an origin such as https://app.example.com (scheme, host and port; no path)" },
  );
const list = z.string().transform((s) =>
  s
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean),
);

/** An IPv4 or IPv6 range (`10.0.0.0/8`, `fd00::/8`) or a single address. */
const cidr = z
  .string()
  .trim()
  .refine((s) => ipaddr.isValidCIDR(s) || ipaddr.isValid(s), { message: "expected a CIDR like 10.1.0.0/16 or an IP address" });

/**
 * An on/off switch: `true` (commander's value for a flag given without one), or `"true"`, `"1"`,
 * `"false"`, `"0"` from a `KILN_*` variable or a config file. Absent is off.
 */
const bool = z
  .union([z.boolean(), z.string().trim()], { error: "expected true, false, 1 or 0" })
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v === false || v === "false" || v === "0") return false;
    if (v === true || v === "true" || v === "1") return true;
    ctx.addIssue({ code: "custom", message: `expected true, false, 1 or 0, got "${v}"` });
    return z.NEVER;
  });

/** One `--node-tokens` entry: a token, the node ids it may register, and what those nodes may offer. */
export interface NodeTokenEntry {
  token: string;
  /** Node ids or `*` globs this token may register; absent: any node id. */
  nodeIds?: string[];
  /** Model ids (chat and whisper) or `*` globs its nodes may offer; absent: any model. */
  models?: string[];
  /** Most slots one of its nodes may register (its pools together; its transcription slots apart); absent: `--max-node-slots`. */
  slots?: number;
}

/** What a node id may be: 1–128 letters, digits, `.`, `_` or `-` (a host name fits). Checked at Register. */
export const NODE_ID_RULE = "1 to 128 letters, digits, '.', '_' or '-'";
const NODE_ID = /^[A-Za-z0-9._-]{1,128}$/;
export const isValidNodeId = (id: string): boolean => NODE_ID.test(id);

/** The part of an entry before its token: IDS, then optional `;models:M1|M2` and `;slots:N`. */
const ENTRY_PREFIX = /^[A-Za-z0-9._*|-]+(;(models:[^;=,\s]+|slots:\d+))*$/;

/**
 * `TOKEN` (any node id, any model, `--max-node-slots`) or `IDS[;models:MODELS][;slots:N]=TOKEN`:
 * IDS are node ids or `*` globs joined by `|`, MODELS model ids or `*` globs joined by `|` (a model
 * id there holds no `;`, `|`, `,`, `=` or whitespace), N the most slots one of those nodes may
 * register. An entry has a prefix only when what precedes its first `=` looks like one and the rest
 * is at least 16 characters, so a bare token with `=` in it (base64 padding) stays a bare token.
 */
export function parseNodeTokenEntry(entry: string): NodeTokenEntry {
  const eq = entry.indexOf("=");
  const prefix = entry.slice(0, eq);
  if (eq > 0 && ENTRY_PREFIX.test(prefix) && entry.length - eq - 1 >= 16) {
    const [ids, ...fields] = prefix.split(";");
    const parsed: NodeTokenEntry = { token: entry.slice(eq + 1), nodeIds: ids!.split("|").filter(Boolean) };
    for (const field of fields) {
      const value = field.slice(field.indexOf(":") + 1);
      if (field.startsWith("models:")) parsed.models = [...(parsed.models ?? []), ...value.split("|").filter(Boolean)];
      else parsed.slots = Number(value);
    }
    return parsed;
  }
  return { token: entry };
}

/**
 * Whether `text` matches `glob` (`*`: any run of characters, everything else literal), in time linear
 * in the text for each literal piece: the first piece is a prefix, the last a suffix, and each piece
 * between is found at its leftmost place after the one before (leftmost is always right for `*`-only
 * globs: a later place leaves less room to the pieces after it). No regular expression, so no backtracking.
 */
export function globMatches(glob: string, text: string): boolean {
  const pieces = glob.split("*");
  if (pieces.length === 1) return glob === text;
  const first = pieces[0]!;
  const last = pieces[pieces.length - 1]!;
  if (text.length < first.length + last.length || !text.startsWith(first) || !text.endsWith(last)) return false;
  let at = first.length;
  const end = text.length - last.length;
  for (let i = 1; i < pieces.length - 1; i++) {
    const piece = pieces[i]!;
    if (!piece) continue;
    const found = text.indexOf(piece, at);
    if (found < 0 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return true;
}

/** A test of names against an entry's names and globs (`*`: any run of characters); no names: any name. */
export function nodeIdMatcher(nodeIds: string[] | undefined): (nodeId: string) => boolean {
  if (!nodeIds) return () => true;
  return (nodeId) => nodeIds.some((glob) => globMatches(glob, nodeId));
}

const nodeTokens = list.pipe(z.array(z.string()).min(1, "at least one token is required")).transform((entries, ctx) =>
  entries.map((entry, i) => {
    const parsed = parseNodeTokenEntry(entry);
    // Messages name the entry by position: a token never goes into an error or a log.
    if (parsed.token.length < 16) ctx.addIssue({ code: "custom", message: "each token must be at least 16 characters" });
    if (/\s/.test(parsed.token)) ctx.addIssue({ code: "custom", message: `entry ${i + 1}: a token cannot hold whitespace (it travels as "Bearer <token>")` });
    if (parsed.nodeIds?.length === 0) ctx.addIssue({ code: "custom", message: `entry ${i + 1}: IDS=TOKEN needs at least one node id before "="` });
    // a prefix mistyped (a "," between models splits the entry) must not become a token any node id may use
    if (!parsed.nodeIds && /;|models:|slots:/.test(entry))
      ctx.addIssue({
        code: "custom",
        message: `entry ${i + 1}: holds ";", "models:" or "slots:" but is not IDS[;models:M1|M2][;slots:N]=TOKEN (models are joined by "|", not ","; the token at least 16 characters)`,
      });
    if (parsed.slots !== undefined && !(parsed.slots >= 1 && parsed.slots <= 65_536))
      ctx.addIssue({ code: "custom", message: `entry ${i + 1}: slots must be a whole number from 1 to 65536` });
    return parsed;
  }),
);

/** A secret sent as `Authorization: Bearer <token>`: at least 16 characters, no whitespace. */
const bearerSecret = z.string().min(16, "must be at least 16 characters").regex(/^\S+$/, 'cannot hold whitespace (it travels as "Bearer <token>")');

/** A model reference (`whisper:<name>`, `hf:<org>/<repo>/<file>.gguf`, `hf:<org>/<repo>:<quant>`), checked (hub/refs.ts). */
const modelRef = z.string().transform((s, ctx): ModelRef => {
  try {
    return parseRef(s);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: (err as Error).message });
    return z.NEVER;
  }
});

/** `ID=GGUF` pairs of `--serve`: a file, or a hub reference pulled into `--models-dir` at start. */
const serveSpec = z.string().transform((s, ctx): { id: string; path: string; ref?: string } => {
  const eq = s.indexOf("=");
  if (eq <= 0 || eq === s.length - 1) {
    ctx.addIssue({ code: "custom", message: `expected ID=GGUF (e.g. famB-v3.1=./model.gguf or famB-v3.1=hf:org/repo/file.gguf), got "${s}"` });
    return z.NEVER;
  }
  const id = s.slice(0, eq);
  const target = s.slice(eq + 1);
  if (!target.startsWith("hf:")) return { id, path: target };
  const ref = modelRef.safeParse(target);
  if (!ref.success) {
    ctx.addIssue({ code: "custom", message: ref.error.issues[0]!.message });
    return z.NEVER;
  }
  // the path is known once it is pulled (agent start); until then it is the reference
  return { id, path: ref.data.ref, ref: ref.data.ref };
});

/** A hub's base URL: http(s), no query or fragment. */
const hubUrl = z.string().transform((s, ctx) => {
  let url: URL | undefined;
  try {
    url = new URL(s);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash || url.username || url.password) {
    ctx.addIssue({ code: "custom", message: `expected an http(s) URL without credentials, query or fragment (e.g. https://huggingface.co), got "${s}"` });
    return z.NEVER;
  }
  return s.replace(/\/+$/, "");
});

/** `--max-inflight`'s default: chat completions an account may have in flight (queued or generating), by tier. */
export const DEFAULT_MAX_INFLIGHT: Readonly<Record<Tier, number>> = { free: 4, standard: 16, pro: 64, enterprise: 256 };

/** Tokens per minute and per day by tier (0: no quota): the free tier's only, by default. */
export const DEFAULT_TOKENS_PER_MINUTE: Readonly<Record<Tier, number>> = { free: 200_000, standard: 0, pro: 0, enterprise: 0 };
export const DEFAULT_TOKENS_PER_DAY: Readonly<Record<Tier, number>> = { free: 2_000_000, standard: 0, pro: 0, enterprise: 0 };

/** Seconds of audio an account may have transcribed per minute and per day, by tier (0: no quota). */
export const DEFAULT_AUDIO_SECONDS_PER_MINUTE: Readonly<Record<Tier, number>> = { free: 600, standard: 3600, pro: 14_400, enterprise: 0 };
export const DEFAULT_AUDIO_SECONDS_PER_DAY: Readonly<Record<Tier, number>> = { free: 3600, standard: 36_000, pro: 360_000, enterprise: 0 };

/** `TIER=N` pairs, comma-separated, over `defaults`: a partial list changes only the tiers it names; N from `min` to `max`. */
const tierCaps = (defaults: Readonly<Record<Tier, number>>, min = 1, max = 1_000_000) =>
  z.string().transform((s, ctx): Record<Tier, number> => {
    const caps = { ...defaults };
    const named = new Set<string>();
    for (const item of s
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean)) {
      const m = /^([a-z]+)\s*=\s*(\d+)$/i.exec(item);
      const tier = m?.[1]!.toLowerCase() ?? "";
      const n = Number(m?.[2]);
      let problem: string | undefined;
      if (!m) problem = `expected TIER=N pairs like pro=64 (tiers: ${TIERS.join(", ")}), got "${item}"`;
      else if (!isTier(tier)) problem = `unknown tier "${m[1]}" (tiers: ${TIERS.join(", ")})`;
      else if (named.has(tier)) problem = `tier "${tier}" is named twice`;
      else if (n < min || n > max) problem = `${tier}: expected a whole number from ${min} to ${max}, got ${m[2]}`;
      else {
        named.add(tier);
        caps[tier] = n;
        continue;
      }
      ctx.addIssue({ code: "custom", message: problem });
      return z.NEVER;
    }
    return caps;
  });

export type { GpuKind };

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
  flags: "--log-level <level>",
  env: "KILN_LOG_LEVEL",
  default: "info",
  description: `log level (${LOG_LEVELS.join(", ")})`,
  schema: z.enum(LOG_LEVELS),
} satisfies OptionSpec;

/** `--drain-seconds`: how long SIGTERM waits for work in flight before exiting. */
const drainSeconds = (what: string) =>
  ({
    flags: "--drain-seconds <s>",
    env: "KILN_DRAIN_SECONDS",
    default: "30",
    description: `on SIGTERM, seconds ${what} before exit`,
    schema: int(0, 3600),
  }) satisfies OptionSpec;

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
  /** Browser origins allowed to call `/v1` (CORS), or `*`. Default none: no CORS headers, browsers keep to same-origin. */
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
  /** Where `--serve ID=hf:…` and `kiln models pull hf:…` put GGUF files. Default: .kiln/models. */
  modelsDir: {
    flags: "--models-dir <dir>",
    env: "KILN_MODELS_DIR",
    default: ".kiln/models",
    description: "folder GGUF files are pulled into (--serve ID=hf:…, kiln models pull hf:…)",
    schema: z.string().min(1),
  },
  /** The model hub weights come from, in Hugging Face's layout ({hub}/{repo}/resolve/{revision}/{file}). Default: https://huggingface.co. */
  hubUrl: {
    flags: "--hub-url <url>",
    env: "KILN_HUB_URL",
    default: "https://huggingface.co",
    description: "model hub that whisper and GGUF files are pulled from, in Hugging Face's layout ({hub}/{repo}/resolve/{revision}/{file}): Hugging Face or a mirror",
    schema: hubUrl,
  },
  /** Token for gated repositories, sent to the hub only and never logged. Default: none. */
  hfToken: {
    flags: "--hf-token <token>",
    env: "HF_TOKEN",
    secret: true,
    description: "token sent to the hub for gated repositories (never logged; default: none)",
    schema: z.string().min(1).optional(),
  },
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
    description: "models to fetch at start, in the background: whisper:<name> or hf:… references (repeatable; comma-separated)",
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
    description: "Silero VAD ONNX model (default: silero_vad.onnx in --whisper-dir)",
    schema: z.string().min(1).optional(),
  },
  segmentationModel: {
    flags: "--segmentation-model <file>",
    env: "KILN_SEGMENTATION_MODEL",
    description: "pyannote segmentation ONNX for speaker diarization (sherpa-onnx export)",
    schema: z.string().min(1).optional(),
  },
  embeddingModel: {
    flags: "--embedding-model <file>",
    env: "KILN_EMBEDDING_MODEL",
    description: "speaker-embedding ONNX for speaker diarization (wespeaker / 3d-speaker)",
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

/** Raw values: strings (flags, variables, a file), lists (repeatable flags), `true` (a flag without a value). */
type Raw = Record<string, string | string[] | boolean | undefined>;
type Parsed<T extends Record<string, OptionSpec>> = { [K in keyof T]: z.output<T[K]["schema"]> };

function parseWith<T extends Record<string, OptionSpec>>(specs: T, raw: Raw, required: (keyof T)[] = []): Parsed<T> {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(specs)) {
    let value = raw[key] ?? spec.default;
    if (spec.repeatable) value = value === undefined ? [] : Array.isArray(value) ? value : String(value).split(",").filter(Boolean);
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

/** Options of `kiln models`: the agent's folders, hub and catalog (and `--serve`, whose ids `list` shows). */
export const MODELS_OPTIONS = (({ whisperDir, modelsDir, hubUrl, hfToken, whisperCatalog, serve, logLevel }) => ({
  whisperDir,
  modelsDir,
  hubUrl,
  hfToken,
  whisperCatalog,
  serve,
  logLevel,
}))(AGENT_OPTIONS);
export type ModelsConfig = Parsed<typeof MODELS_OPTIONS>;

export function parseModelsConfig(raw: Raw): ModelsConfig {
  return parseWith(MODELS_OPTIONS, raw);
}

/** `--flag / KILN_VAR` of a declared option, as a `ConfigError` names it. */
export const optionName = (spec: OptionSpec): string => `${spec.flags.split(" ")[0]} / ${spec.env}`;

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

export function parseAgentConfig(raw: Raw): AgentConfig {
  const config = parseWith(AGENT_OPTIONS, raw);
  if (config.offline && config.pull.length > 0) throw new ConfigError(optionName(AGENT_OPTIONS.pull), "contradicts --offline (which never downloads): give one or the other");
  if (config.offline && config.fetchModels.length > 0)
    throw new ConfigError(optionName(AGENT_OPTIONS.fetchModels), "contradicts --offline (which never downloads): give one or the other");
  const unknown = config.fetchModels.filter((name) => !config.whisperCatalog.has(name));
  if (unknown.length > 0)
    throw new ConfigError(optionName(AGENT_OPTIONS.fetchModels), `${unknown.join(", ")} not in the whisper catalog (${config.whisperCatalog.names.join(", ")})`);
  for (const ref of config.pull) {
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
  if (config.translationModel && !config.serve.some((s) => s.id === config.translationModel)) {
    throw new ConfigError("--translation-model / KILN_TRANSLATION_MODEL", `"${config.translationModel}" is not one of the --serve ids`);
  }
  return config;
}

/** The effective configuration with every secret masked (and any URL's password), for `--print-config` and start-up logs. */
export function maskSecrets(specs: Record<string, OptionSpec>, config: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, specs[k]?.secret && v !== undefined ? "[redacted]" : typeof v === "string" ? withoutPassword(v) : v]));
}

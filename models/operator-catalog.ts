/**
 * The operator's model catalog (`kiln scheduler --catalog FILE`, and the dashboard's editor): the chat
 * models the API accepts in place of the eight built-in ids (models/catalog.ts), each with where its
 * weights come from, its aliases, and how it is to be run and replicated.
 *
 * ```json
 * {"models": [{"id": "chat-large", "source": "hf:org/repo:Q4_K_M", "aliases": ["gpt-4o"],
 *              "context_size": 8192, "sequences": 4, "min_replicas": 1, "max_replicas": 4, "idle_unload_s": 600}]}
 * ```
 *
 * A pure module: it parses and checks a catalog (a file's JSON, a dashboard's PUT, the rows another
 * scheduler stored) and reads no file. Every refusal names the entry (its index and id) and the field.
 */
import { posix } from "node:path";
import { z } from "zod";
import { parseRef, splitOf, partPath, type ModelRef } from "../hub/refs.js";
import { parseSpeculation } from "../core/speculation.js";

/** The bounds of every number and list of a catalog. */
export const CATALOG_LIMITS = {
  /** Entries in one catalog. */
  entries: 1024,
  /** Aliases of one entry. */
  aliases: 32,
  /** Characters of an id or alias. */
  nameLength: 128,
  /** Characters of a source. */
  sourceLength: 1024,
  /** Characters of `name` and `owned_by`. */
  labelLength: 128,
  /** Context tokens per sequence (the agent's `--context-size` bounds). */
  contextSize: { min: 64, max: 1_048_576 },
  /** Parallel sequences (slots) of one replica (the agent's `--sequences` bounds). */
  sequences: { min: 1, max: 256 },
  /** Replicas of one model, fleet-wide. */
  replicas: 1024,
  /** Seconds a replica may sit idle before its memory may be taken back (30 days). */
  idleUnloadS: 2_592_000,
  /** Bytes a replica is said to need (1 PiB). */
  memoryBytes: 2 ** 50,
} as const;

/** What an entry that leaves a field out gets. */
export const CATALOG_DEFAULTS = { aliases: [] as string[], context_size: 4096, sequences: 4, min_replicas: 0, max_replicas: 1, idle_unload_s: 600 } as const;

/** An id or alias: a letter or digit, then letters, digits, `.`, `:`, `_`, `-` or `/`; at most 128 characters. */
export const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9.:_/-]{0,127}$/;
const NAME_RULE = "must be 1 to 128 letters, digits, '.', ':', '_', '-' or '/', starting with a letter or digit";

/** One model of the operator's catalog, its defaults applied. */
export interface OperatorCatalogEntry {
  /** The canonical id: what `/v1/models` lists, usage is recorded under, and nodes serve. */
  id: string;
  /**
   * Where the weights come from: `hf:<org>/<repo>:<quant>`, `hf:<org>/<repo>/<file>.gguf[#revision]`
   * or an absolute path on the nodes. A split GGUF is named by its first part (any part given is
   * turned into it). `parseModelSource` reads it.
   */
  source: string;
  /** Other names the API accepts for it. Default none. */
  aliases: string[];
  /** Context tokens per sequence. Default 4096. */
  context_size: number;
  /** Parallel sequences (slots) of a replica. Default 4. */
  sequences: number;
  /** Replicas kept loaded even when idle. Default 0. */
  min_replicas: number;
  /** Most replicas fleet-wide. Default 1. */
  max_replicas: number;
  /** Seconds idle after which a replica's memory may be taken back. Default 600. */
  idle_unload_s: number;
  /** Bytes a replica needs, when the operator says so rather than leaving it to the estimate from the GGUF. */
  memory_bytes?: number;
  /** `owned_by` in `/v1/models` (default "kiln"). */
  owned_by?: string;
  /** A human name for shape B of `/v1/models` (default the id). */
  name?: string;
  /**
   * Speculative decoding on the replicas placed (agent/llm/speculative.ts): `lookup` (prompt lookup)
   * or `draft:<source>`, a draft model with the same vocabulary, its source written as `source` is
   * (and stored in the same canonical form). Default none.
   */
  speculative?: string;
}

export interface OperatorCatalog {
  models: OperatorCatalogEntry[];
}

/** A source, read: a hub file or quantization (hub/refs.ts's references), or a path on the nodes. */
export type ModelSource = Extract<ModelRef, { kind: "gguf" } | { kind: "gguf-quant" }> | { kind: "path"; ref: string; path: string };

/** A catalog that fails its checks: `field` is the member at fault (`models[2].max_replicas`), `message` starts with the entry and field. */
export class OperatorCatalogError extends Error {
  constructor(
    message: string,
    readonly field: string,
  ) {
    super(message);
    this.name = "OperatorCatalogError";
  }
}

const SOURCE_RULE = "must be hf:<org>/<repo>:<quant>, hf:<org>/<repo>/<file>.gguf or an absolute path on the nodes (/models/<file>.gguf)";

/** Reads a source (module doc); throws an Error saying what is wrong with it. */
export function parseModelSource(source: string): ModelSource {
  if (source.length > CATALOG_LIMITS.sourceLength) throw new Error(`must be at most ${CATALOG_LIMITS.sourceLength} characters`);
  if (source.startsWith("hf:")) {
    let ref: ModelRef;
    try {
      ref = parseRef(source);
    } catch (err) {
      // hub/refs.ts says what is wrong, then lists every form a reference may take; only the why belongs here
      const why = /is not a model reference: (.*?)(?: \(expected .*\))?$/.exec((err as Error).message)?.[1] ?? (err as Error).message;
      throw new Error(`${JSON.stringify(source)}: ${why}`);
    }
    if (ref.kind !== "gguf" && ref.kind !== "gguf-quant") throw new Error(SOURCE_RULE);
    return ref;
  }
  if (!source.startsWith("/")) throw new Error(SOURCE_RULE);
  if (/[\u0000-\u001f\u007f]/.test(source)) throw new Error("the path holds a control character");
  if (posix.normalize(source) !== source || source.endsWith("/")) throw new Error(`${JSON.stringify(source)} is not a plain absolute path (no '.', '..' or empty parts)`);
  if (!source.toLowerCase().endsWith(".gguf")) throw new Error(`${JSON.stringify(source)} is not a .gguf file`);
  const file = posix.basename(source);
  const split = splitOf(file);
  if (split === null) throw new Error(`${JSON.stringify(source)}: the split GGUF's part number is 0 or beyond its count`);
  // any part names the set, by its first part (the one llama.cpp loads; it finds the others by name)
  const path = split ? posix.join(posix.dirname(source), partPath(split, 1)) : source;
  return { kind: "path", ref: path, path };
}

/** A whole number in `[min, max]`, with one message for every way of missing it. */
const whole = (min: number, max: number) => {
  const error = (issue: { input?: unknown }) => `must be a whole number from ${min} to ${max}, got ${describe(issue.input)}`;
  return z.int({ error }).min(min, { error }).max(max, { error });
};

/** A value as a message shows it: a string quoted and cut short, a number as it is, anything else by its JSON type. */
function describe(v: unknown): string {
  if (typeof v === "string") return v.length > 40 ? `${JSON.stringify(v.slice(0, 40)).slice(0, -1)}…"` : JSON.stringify(v);
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return v === null ? "null" : Array.isArray(v) ? "an array" : v === undefined ? "nothing" : typeof v;
}

const name = z.string({ error: NAME_RULE }).regex(MODEL_NAME, { error: (issue) => `${NAME_RULE}, got ${describe(issue.input)}` });
const label = z
  .string({ error: `must be a string of 1 to ${CATALOG_LIMITS.labelLength} characters` })
  .min(1, { error: `must be a string of 1 to ${CATALOG_LIMITS.labelLength} characters` })
  .max(CATALOG_LIMITS.labelLength, { error: `must be a string of 1 to ${CATALOG_LIMITS.labelLength} characters` })
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), { error: "must hold no control characters" });

const source = z
  .string({ error: SOURCE_RULE })
  .transform((s, ctx) => {
    try {
      return parseModelSource(s).ref;
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message, input: s });
      return z.NEVER;
    }
  });

/** `lookup` or `draft:<source>`, the source by `source`'s rules and in its canonical form. */
const speculative = z.string({ error: 'must be "lookup" or "draft:<source>"' }).transform((s, ctx) => {
  const parsed = parseSpeculation(s);
  if (typeof parsed === "string") {
    ctx.addIssue({ code: "custom", message: parsed, input: s });
    return z.NEVER;
  }
  if (parsed.kind === "lookup") return "lookup";
  try {
    return `draft:${parseModelSource(parsed.source).ref}`;
  } catch (err) {
    ctx.addIssue({ code: "custom", message: `the draft's source: ${(err as Error).message}`, input: s });
    return z.NEVER;
  }
});

const Entry = z
  .strictObject({
    id: name,
    source,
    aliases: z
      .array(name, { error: `must be a list of up to ${CATALOG_LIMITS.aliases} names` })
      .max(CATALOG_LIMITS.aliases, { error: `must be a list of up to ${CATALOG_LIMITS.aliases} names` })
      .default(() => [...CATALOG_DEFAULTS.aliases]),
    context_size: whole(CATALOG_LIMITS.contextSize.min, CATALOG_LIMITS.contextSize.max).default(CATALOG_DEFAULTS.context_size),
    sequences: whole(CATALOG_LIMITS.sequences.min, CATALOG_LIMITS.sequences.max).default(CATALOG_DEFAULTS.sequences),
    min_replicas: whole(0, CATALOG_LIMITS.replicas).default(CATALOG_DEFAULTS.min_replicas),
    max_replicas: whole(1, CATALOG_LIMITS.replicas).default(CATALOG_DEFAULTS.max_replicas),
    idle_unload_s: whole(0, CATALOG_LIMITS.idleUnloadS).default(CATALOG_DEFAULTS.idle_unload_s),
    memory_bytes: whole(1, CATALOG_LIMITS.memoryBytes).optional(),
    owned_by: label.optional(),
    name: label.optional(),
    speculative: speculative.optional(),
  })
  .superRefine((e, ctx) => {
    if (e.max_replicas < e.min_replicas) {
      ctx.addIssue({ code: "custom", path: ["max_replicas"], message: `must be ≥ min_replicas (${e.min_replicas}), got ${e.max_replicas}`, input: e.max_replicas });
    }
  });

const Catalog = z
  .strictObject({
    models: z
      .array(Entry, { error: "must be a list of models" })
      .min(1, { error: "must list at least one model (to go back to the built-in ids, remove the catalog)" })
      .max(CATALOG_LIMITS.entries, { error: `must list at most ${CATALOG_LIMITS.entries} models` }),
  })
  .superRefine((catalog, ctx) => {
    // one namespace: an id or alias names one model only
    const named = new Map<string, string>();
    catalog.models.forEach((e, i) => {
      const names: [string, (string | number)[]][] = [[e.id, ["id"]], ...e.aliases.map((a, j): [string, (string | number)[]] => [a, ["aliases", j]])];
      for (const [n, at] of names) {
        const before = named.get(n);
        if (before) ctx.addIssue({ code: "custom", path: ["models", i, ...at], message: `${JSON.stringify(n)} already names ${before}`, input: n });
        else named.set(n, at[0] === "id" ? `models[${i}]` : `models[${i}] (an alias)`);
      }
    });
  });

/** `["models", 2, "aliases", 0]` → `models[2].aliases[0]`. */
function fieldOf(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) out += typeof key === "number" ? `[${key}]` : out ? `.${String(key)}` : String(key);
  return out;
}

/**
 * The catalog `json` holds, its defaults applied and each source in its canonical form; throws an
 * `OperatorCatalogError` whose message names the entry and the field:
 * `models[2] ("famX"): max_replicas: must be ≥ min_replicas (3), got 1`.
 */
export function parseOperatorCatalog(json: unknown): OperatorCatalog {
  const parsed = Catalog.safeParse(json, { reportInput: true });
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  let path: PropertyKey[] = [...issue.path];
  let message = issue.message;
  if (issue.code === "unrecognized_keys") {
    // the member is the field at fault, not the object holding it
    path = [...path, issue.keys[0]!];
    message = path.length > 1 ? "is not a field of a catalog entry (id, source, aliases, context_size, sequences, min_replicas, max_replicas, idle_unload_s, memory_bytes, owned_by, name, speculative)" : 'is not a member of a catalog (only "models")';
  } else if (issue.code === "invalid_type" && path.length === 0) message = 'must be an object {"models": […]}';
  else if (issue.code === "invalid_type" && path.length === 2) message = "must be an object with id and source";
  else if (issue.code === "invalid_type" && (issue as { input?: unknown }).input === undefined && typeof path.at(-1) === "string") message = "is required";
  const field = fieldOf(path);
  let where = field || "(top)";
  if (path[0] === "models" && typeof path[1] === "number") {
    const id = (json as { models: { id?: unknown }[] }).models[path[1]]?.id;
    const entry = `models[${path[1]}]${typeof id === "string" ? ` (${describe(id)})` : ""}`;
    const rest = fieldOf(path.slice(2));
    where = rest ? `${entry}: ${rest}` : entry;
  }
  throw new OperatorCatalogError(`${where}: ${message}`, field || "models");
}

/** Every name of a catalog (ids and aliases) to its entry. */
export function catalogNames(catalog: { models: readonly OperatorCatalogEntry[] }): Map<string, OperatorCatalogEntry> {
  const names = new Map<string, OperatorCatalogEntry>();
  for (const e of catalog.models) for (const n of [e.id, ...e.aliases]) names.set(n, e);
  return names;
}

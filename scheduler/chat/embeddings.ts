/**
 * `POST /v1/embeddings`: OpenAI's request (one text or a batch; `encoding_format` float or base64;
 * `dimensions` only as the model's own size) and its `list` answer.
 */
import { z } from "zod";
import { parseBody } from "../../core/schema.js";
import type { CompletionRequest } from "../fleet/index.js";
import { BUILTIN_MODEL_NAMES, GENERATION_FIELDS, resolveModel, type ModelNames } from "./schema.js";

/** Most texts in one request (OpenAI's limit). */
export const MAX_EMBEDDING_INPUTS = 2048;

const text = z.string({ error: "a non-empty string" }).min(1, { error: "a non-empty string" });

const Fields = {
  model: GENERATION_FIELDS.model,
  input: z
    .union(
      [
        text,
        z
          .array(text)
          .min(1, { error: "at least one text" })
          .max(MAX_EMBEDDING_INPUTS, { error: `at most ${MAX_EMBEDDING_INPUTS} texts` }),
      ],
      { error: "a string or an array of strings" },
    )
    .meta({ description: `A text, or up to ${MAX_EMBEDDING_INPUTS} texts (each within the model's context). Token-id inputs are refused.` }),
  encoding_format: z
    .enum(["float", "base64"], { error: "one of float, base64" })
    .nullish()
    .meta({ description: "float (default): arrays of numbers; base64: each vector's little-endian float32 bytes." }),
  dimensions: z
    .int({ error: "an integer from 1 to 65536" })
    .min(1)
    .max(65536)
    .nullish()
    .meta({ description: "Only the model's own vector size is accepted (these models cannot shorten their embeddings); another is a 400 invalid_dimensions." }),
  user: GENERATION_FIELDS.user,
};

/** The embeddings request (unknown members pass through). */
export const EmbeddingsRequest = z.looseObject(Fields).meta({ id: "EmbeddingsRequest", description: "OpenAI's embeddings request, from a served model's embedding context." });

const KNOWN: ReadonlySet<string> = new Set(Object.keys(Fields));

export interface EmbeddingsBody extends CompletionRequest {
  /** The name the client sent (an id or an alias), which the answer carries; `model` is the canonical id it names. */
  requestedModel: string;
  embed: { inputs: string[]; dimensions?: number };
  base64: boolean;
  ignored: string[];
}

/** `models`: the names `model` may give (the scheduler's catalog). Default the built-in ids. */
export function validateEmbeddings(body: unknown, models: ModelNames = BUILTIN_MODEL_NAMES): EmbeddingsBody {
  const model = resolveModel(body, models);
  const b = parseBody(EmbeddingsRequest, body);
  return {
    model: model ?? b.model,
    requestedModel: b.model,
    messages: [],
    embed: { inputs: typeof b.input === "string" ? [b.input] : b.input, ...(b.dimensions ? { dimensions: b.dimensions } : {}) },
    base64: b.encoding_format === "base64",
    ignored: Object.keys(body as object).filter((k) => !KNOWN.has(k) || k === "user"),
  };
}

/** A vector as OpenAI's base64 encoding gives it: its float32 values' little-endian bytes. */
export function base64Vector(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString("base64");
}

export function embeddingsBody(model: string, vectors: number[][], promptTokens: number, base64: boolean) {
  return {
    object: "list",
    model,
    data: vectors.map((v, index) => ({ object: "embedding", index, embedding: base64 ? base64Vector(v) : v })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

/**
 * How a completion is generated, on the wire: CompletionRequest's sampling fields (`Sampling`, core/chat.ts)
 * both ways from one table, and its `ResponseFormat`.
 */
import type { ResponseFormat, Sampling } from "../core/chat.js";
import type { CompletionRequest, CompletionRequest__Output } from "./gen/kiln/v1/CompletionRequest.js";

/** Each Sampling field and its proto field. */
const FIELDS = [
  ["topP", "top_p"],
  ["topK", "top_k"],
  ["minP", "min_p"],
  ["seed", "seed"],
  ["presencePenalty", "presence_penalty"],
  ["frequencyPenalty", "frequency_penalty"],
  ["repeatPenalty", "repeat_penalty"],
  ["logitBias", "logit_bias"],
  ["stop", "stop"],
] as const satisfies readonly (readonly [keyof Sampling, keyof CompletionRequest])[];

/** An absent, empty list or empty map field is the engine's default. */
const isSet = (v: unknown): boolean =>
  v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0) && !(typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0);

/** The proto fields of `sampling` (the scheduler's side). */
export function samplingToProto(sampling: Sampling = {}): Partial<CompletionRequest> {
  const out: Record<string, unknown> = {};
  for (const [key, field] of FIELDS) if (isSet(sampling[key])) out[field] = sampling[key];
  return out as Partial<CompletionRequest>;
}

/** The Sampling of a received request (the agent's side). */
export function samplingFromProto(req: CompletionRequest__Output): Sampling {
  const out: Record<string, unknown> = {};
  for (const [key, field] of FIELDS) if (isSet(req[field])) out[key] = req[field];
  return out as Sampling;
}

/** The proto field of a response format (the scheduler's side); nothing for free text. */
export function responseFormatToProto(format: ResponseFormat | undefined): Partial<CompletionRequest> {
  if (!format) return {};
  return { response_format: { type: format.type, json_schema: format.type === "json_schema" ? JSON.stringify(format.schema) : "" } };
}

/**
 * The ResponseFormat of a received request (the agent's side). A type this agent does not know, or a
 * schema that is not JSON, is an error rather than free text: the client asked for the output to be held.
 */
export function responseFormatFromProto(req: CompletionRequest__Output): ResponseFormat | undefined {
  const format = req.response_format;
  if (!format || format.type === "") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type === "json_schema") {
    const schema = JSON.parse(format.json_schema) as unknown;
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) throw new TypeError("response_format.json_schema: not a JSON object");
    return { type: "json_schema", schema: schema as Record<string, unknown> };
  }
  throw new TypeError(`response_format: unknown type "${format.type}"`);
}

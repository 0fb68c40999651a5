/** `Sampling` (core/chat.ts) on the wire: CompletionRequest's sampling fields, both ways, from one table. */
import type { Sampling } from "../core/chat.js";
import type { CompletionRequest, CompletionRequest__Output } from "./gen/kiln/v1/CompletionRequest.js";

/** Each Sampling field and its proto field. */
const FIELDS = [
  ["topP", "top_p"], ["topK", "top_k"], ["minP", "min_p"], ["seed", "seed"], ["presencePenalty", "presence_penalty"],
  ["frequencyPenalty", "frequency_penalty"], ["repeatPenalty", "repeat_penalty"], ["logitBias", "logit_bias"], ["stop", "stop"],
] as const satisfies readonly (readonly [keyof Sampling, keyof CompletionRequest])[];

/** An absent, empty list or empty map field is the engine's default. */
const isSet = (v: unknown): boolean => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0) && !(typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0);

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

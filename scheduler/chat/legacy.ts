/**
 * `POST /v1/completions`, OpenAI's legacy prompt API: the prompt given to the model as it is, with no
 * chat template, continued. The request's schema (shared generation fields plus `prompt`, `echo`,
 * the legacy `logprobs` count), its validation, and the `text_completion` bodies it answers with.
 */
import { z } from "zod";
import { randomId } from "../../core/ids.js";
import { MAX_CHOICES } from "../../core/chat.js";
import { issueCode, parseBody } from "../../core/schema.js";
import { describeValue } from "../../core/validate.js";
import type { CompletionRequest, TokenLogprob } from "../fleet/index.js";
import { fingerprintOf, usage, type Done } from "./openai.js";
import { BUILTIN_MODEL_NAMES, GENERATION_FIELDS, present, resolveModel, type ModelNames } from "./schema.js";
import { checkLogprobBudget, samplingOf } from "./validate.js";

/** `max_tokens` when none is given: OpenAI's legacy default. */
export const LEGACY_DEFAULT_MAX_TOKENS = 16;
/** Most alternatives the legacy `logprobs` asks for per token (OpenAI's limit). */
export const MAX_LEGACY_LOGPROBS = 5;

const Fields = {
  ...GENERATION_FIELDS,
  prompt: z
    .union([z.string().min(1, { error: "a non-empty string" }), z.array(z.string({ error: "a non-empty string" }).min(1, { error: "a non-empty string" }))], { error: "a string" })
    .meta({ description: "The text to continue, given to the model as it is (no chat template). A list of one string is that string; more, or token ids, are refused." }),
  max_tokens: GENERATION_FIELDS.max_tokens.meta({ description: `Most tokens to generate; default ${LEGACY_DEFAULT_MAX_TOKENS}, and never more than the context has left.` }),
  echo: z.boolean({ error: "a boolean" }).nullish().meta({ description: "The prompt before the generated text in the choice's text (its tokens are not scored)." }),
  logprobs: z
    .int({ error: `an integer from 0 to ${MAX_LEGACY_LOGPROBS}` })
    .min(0)
    .max(MAX_LEGACY_LOGPROBS)
    .nullish()
    .meta({ description: "Log probabilities of the generated tokens with this many alternatives each: choices[].logprobs {tokens, token_logprobs, top_logprobs, text_offset}." }),
  n: z
    .int({ error: `an integer from 1 to ${MAX_CHOICES}` })
    .min(1)
    .max(MAX_CHOICES)
    .nullish()
    .meta({ description: "Choices to generate, sharing the prompt's evaluation (as the chat API's n)." }),
  best_of: z.int({ error: "an integer of at least 1" }).min(1).nullish().meta({ description: "Only 1 is supported (more is refused)." }),
  suffix: z.string({ error: "a string" }).nullish().meta({ description: "Not supported: a non-empty suffix (insertion) is refused." }),
};

const Shape = z.looseObject(Fields);

/** The legacy completion request (unknown members pass through). */
export const LegacyCompletionRequest = Shape.superRefine((b, ctx) => {
  const refuse = (field: string, message: string, input: unknown): void => {
    ctx.addIssue({ code: "custom", path: [field], message, params: issueCode("unsupported_parameter"), input });
  };
  if (Array.isArray(b.prompt) && b.prompt.length !== 1) refuse("prompt", `a list of ${b.prompt.length} prompts is not supported; send one`, b.prompt);
  if (present(b.best_of) && b.best_of !== 1) refuse("best_of", "best_of above 1 is not supported", b.best_of);
  if (b.suffix) refuse("suffix", `insertion (a suffix of ${describeValue(b.suffix)}) is not supported`, b.suffix);
  // OpenAI scores the echoed prompt's tokens too; Kiln does not evaluate them for that: refused rather than wrong
  if (b.echo && present(b.logprobs)) refuse("echo", "with logprobs is not supported (the prompt's tokens are not scored); send one of them", b.echo);
}).meta({ id: "CompletionRequest", description: "OpenAI's legacy completion request; unknown members are accepted and listed in the x-kiln-ignored-fields response header." });

const KNOWN: ReadonlySet<string> = new Set(Object.keys(Fields));

export interface LegacyCompletionBody extends CompletionRequest {
  /** The name the client sent (an id or an alias), which the answer carries; `model` is the canonical id it names. */
  requestedModel: string;
  prompt: string;
  stream: boolean;
  includeUsage: boolean;
  /** The prompt goes before the generated text in the answer. */
  echo: boolean;
  ignored: string[];
}

/** `models`: the names `model` may give (the scheduler's catalog). Default the built-in ids. */
export function validateLegacyCompletion(body: unknown, models: ModelNames = BUILTIN_MODEL_NAMES): LegacyCompletionBody {
  const model = resolveModel(body, models);
  const b = parseBody(LegacyCompletionRequest, body);
  const prompt = typeof b.prompt === "string" ? b.prompt : b.prompt[0]!;
  const out: LegacyCompletionBody = {
    model: model ?? b.model,
    requestedModel: b.model,
    messages: [],
    prompt,
    maxTokens: b.max_tokens ?? LEGACY_DEFAULT_MAX_TOKENS,
    stream: b.stream ?? false,
    includeUsage: b.stream_options?.include_usage ?? false,
    echo: b.echo ?? false,
    ignored: Object.keys(body as object).filter((k) => !KNOWN.has(k) || k === "user"),
  };
  if (present(b.temperature)) out.temperature = b.temperature!;
  const sampling = samplingOf(b);
  if (sampling) out.sampling = sampling;
  if (present(b.logprobs)) out.logprobs = b.logprobs!;
  if (b.n && b.n > 1) out.n = b.n;
  checkLogprobBudget(out);
  return out;
}

export function legacyCompletionId(): string {
  return `cmpl-${randomId(12)}`;
}

/**
 * The legacy `logprobs` of some generated tokens: parallel lists, `top_logprobs` as objects of token →
 * log probability, `text_offset` where each token starts in the choice's text (the agent's offsets in
 * the generated text, after `before` characters of echoed prompt).
 */
export function legacyLogprobs(entries: TokenLogprob[], before: number) {
  return {
    tokens: entries.map((e) => e.token),
    token_logprobs: entries.map((e) => e.logprob),
    top_logprobs: entries.map((e) => alternativesByText(e.top_logprobs)),
    text_offset: entries.map((e) => before + e.text_offset),
  };
}

/** One choice of a `text_completion`. */
export interface LegacyChoice {
  index: number;
  text: string;
  logprobs: ReturnType<typeof legacyLogprobs> | null;
  finish_reason: string | null;
}

/**
 * Alternatives as the legacy API gives them, an object of text → log probability, most likely first.
 * Tokens of the same text (byte pieces, say) share a key: the most likely one's stands. A null
 * prototype, so that a token whose text is `__proto__` is a key like any other.
 */
function alternativesByText(alternatives: readonly { token: string; logprob: number }[]): Record<string, number> {
  const out = Object.create(null) as Record<string, number>;
  for (const t of alternatives) if (!Object.hasOwn(out, t.token)) out[t.token] = t.logprob;
  return out;
}

/** A `text_completion` body (or, streamed, one chunk of one). */
export function legacyBody(s: { id: string; created: number; model: string }, choices: LegacyChoice[], done: Done | undefined, withUsage: boolean) {
  return {
    id: s.id,
    object: "text_completion",
    created: s.created,
    model: s.model,
    ...fingerprintOf(done),
    choices: choices.map((c) => ({ text: c.text, index: c.index, logprobs: c.logprobs, finish_reason: c.finish_reason })),
    ...(withUsage && done ? { usage: usage(done) } : {}),
  };
}

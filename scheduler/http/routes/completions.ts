/**
 * `POST /v1/completions`: OpenAI's legacy prompt API on the generation route (generate.ts). With
 * `echo`, the prompt comes first in the text (streamed: in a chunk of its own, before any generated text).
 */
import type { Hono } from "hono";
import { legacyBody, legacyCompletionId, legacyLogprobs, validateLegacyCompletion, type LegacyCompletionBody } from "../../chat/legacy.js";
import type { AppEnv } from "../env.js";
import { generationRoute, type GenerationApi, type GenerationDeps } from "./generate.js";

/** The indexes of a request's choices. */
const indexes = (body: { n?: number }): number[] => Array.from({ length: body.n ?? 1 }, (_, i) => i);
/** A chunk's logprobs with no tokens in it: empty lists when asked for, else null. */
const noLogprobs = (body: LegacyCompletionBody) => (body.logprobs !== undefined ? legacyLogprobs([], 0) : null);

export function completionsRoutes(deps: GenerationDeps): Hono<AppEnv> {
  const before = (body: LegacyCompletionBody) => (body.echo ? body.prompt : "");
  const api: GenerationApi<LegacyCompletionBody> = {
    usageKind: "completion",
    validate: (body) => validateLegacyCompletion(body, deps.models),
    newId: legacyCompletionId,
    answer: (body, a, choices, done) =>
      legacyBody(
        a,
        choices.map((c, index) => ({
          index,
          text: before(body) + c.text,
          logprobs: c.logprobs ? legacyLogprobs(c.logprobs, before(body).length) : null,
          finish_reason: done.finishReasons[index] ?? done.finishReason,
        })),
        done,
        true,
      ),
    opening: (body, a) =>
      body.echo ? indexes(body).map((index) => legacyBody(a, [{ index, text: body.prompt, logprobs: noLogprobs(body), finish_reason: null }], undefined, false)) : [],
    textChunk: (body, a, index, text, logprobs) =>
      legacyBody(a, [{ index, text, logprobs: logprobs ? legacyLogprobs(logprobs, before(body).length) : null, finish_reason: null }], undefined, false),
    closing: (body, a, done) => [
      ...indexes(body).map((index) => legacyBody(a, [{ index, text: "", logprobs: noLogprobs(body), finish_reason: done.finishReasons[index] ?? done.finishReason }], done, false)),
      ...(body.includeUsage ? [legacyBody(a, [], done, true)] : []),
    ],
  };
  return generationRoute(api, deps);
}

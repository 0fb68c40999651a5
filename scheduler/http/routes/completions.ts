/**
 * `POST /v1/completions`: OpenAI's legacy prompt API on the generation route (generate.ts). With
 * `echo`, the prompt comes first in the text (streamed: in a chunk of its own, before any generated text).
 */
import type { Hono } from "hono";
import { legacyBody, legacyCompletionId, legacyLogprobs, validateLegacyCompletion, type LegacyCompletionBody } from "../../chat/legacy.js";
import type { AppEnv } from "../env.js";
import { generationRoute, type GenerationApi, type GenerationDeps } from "./generate.js";

export function completionsRoutes(deps: GenerationDeps): Hono<AppEnv> {
  const before = (body: LegacyCompletionBody) => (body.echo ? body.prompt : "");
  const api: GenerationApi<LegacyCompletionBody> = {
    validate: validateLegacyCompletion,
    newId: legacyCompletionId,
    answer: (body, a, text, done, logprobs) => legacyBody(a, before(body) + text, done, logprobs ? legacyLogprobs(logprobs, before(body).length) : null, true),
    opening: (body, a) => (body.echo && body.prompt ? legacyBody(a, body.prompt, undefined, body.logprobs !== undefined ? legacyLogprobs([], 0) : null, false) : undefined),
    textChunk: (body, a, text, logprobs, offset) => legacyBody(a, text, undefined, logprobs ? legacyLogprobs(logprobs, before(body).length + offset) : null, false),
    closing: (body, a, done) => [
      legacyBody(a, "", done, body.logprobs !== undefined ? legacyLogprobs([], 0) : null, false),
      ...(body.includeUsage ? [{ ...legacyBody(a, "", done, null, true), choices: [] }] : []),
    ],
  };
  return generationRoute(api, deps);
}

/**
 * `POST /v1/embeddings`: through the fleet to an agent whose pool serves the model with the
 * `embeddings` capability, under the account's in-flight cap like a completion (it holds a slot).
 */
import { Hono } from "hono";
import { UpstreamError } from "../../../core/errors.js";
import { readJsonBody } from "../../../core/http/index.js";
import { embeddingsBody, validateEmbeddings } from "../../chat/embeddings.js";
import type { AppEnv } from "../env.js";
import { IGNORED_FIELDS_HEADER, ignoredFieldsHeader, type GenerationDeps } from "./generate.js";
import { setResponseHeader } from "../../../core/http/headers.js";

export function embeddingsRoutes({ fleet, models, usage, tokens, maxBodyBytes, metrics, cap }: GenerationDeps): Hono<AppEnv> {
  return new Hono<AppEnv>().post("/", async (c) => {
    const { account, tier, keyId } = c.get("identity");
    const release = await cap.inflight.acquire(account, cap.maxInflight[tier]);
    let unreserve = (): void => undefined;
    try {
      const body = validateEmbeddings(await readJsonBody(c, maxBodyBytes), models);
      // the account's token quotas hold the inputs' tokens (four characters a token) until the answer
      unreserve = await tokens.reserve(account, tier, Math.ceil(body.embed.inputs.reduce((n, t) => n + t.length, 0) / 4));
      if (body.ignored.length > 0) setResponseHeader(c, IGNORED_FIELDS_HEADER, ignoredFieldsHeader(body.ignored));
      const signal = c.req.raw.signal;
      const owner = { account, keyId, model: body.model, kind: "embedding" as const, requestId: c.get("requestId") };
      const onUsage = (used: { promptTokens: number; completionTokens: number }) => usage.record({ ...owner, ...used, audioSeconds: 0 });
      for await (const e of metrics.measure(fleet.submit({ ...body, account, onUsage }, signal, c.get("requestId")), body.model)) {
        if (e.type === "embeddings") return c.json(embeddingsBody(body.requestedModel, e.vectors, e.promptTokens, body.base64));
      }
      throw new UpstreamError("agent_error", "the agent ended the request without its embeddings");
    } finally {
      unreserve();
      release();
    }
  });
}

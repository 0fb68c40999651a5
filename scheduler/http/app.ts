/** The scheduler's public HTTP API (Hono): `/v1/chat/completions`, `/v1/responses`, `/v1/completions`, `/v1/embeddings`, `/v1/audio/*`, `/v1/models`, `/v1/mcp`; `/healthz`, `/readyz`, `/metrics`, `/v1/openapi.json`; the dashboard. */
import { Hono, type MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import type { AppEnv, HttpDeps } from "./env.js";
import { authenticate, rateLimit, tokenQuota } from "./middleware/auth.js";
import { notFound, onError, parseBearer, requestId, setResponseHeader, setResponseHeaders } from "../../core/http/index.js";
import { sameSecret } from "../../core/digest.js";
import { AuthenticationError } from "../../core/errors.js";
import { audioRoutes } from "./routes/audio.js";
import { usageRoutes } from "./routes/usage.js";
import { chatRoutes } from "./routes/chat.js";
import { completionsRoutes } from "./routes/completions.js";
import { responsesRoutes } from "./routes/responses.js";
import { embeddingsRoutes } from "./routes/embeddings.js";
import { dashboardRoutes } from "../dashboard/index.js";
import { mcpRoutes } from "./routes/mcp.js";
import { messagesRoutes } from "./routes/messages.js";
import { modelRoutes } from "./routes/models.js";
import { openApiDocument } from "./openapi.js";
import { KILN_VERSION } from "../../core/version.js";

export function createHttpApp(deps: HttpDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.onError(onError(deps.logger));
  app.notFound(notFound);
  app.use("*", requestId());
  app.use("*", deps.metrics.middleware);
  // Operations endpoints: no key, for load balancers and Prometheus (/metrics keeps what names accounts to the metrics token).
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", (c) => {
    const r = deps.ready();
    return c.json(r, r.ready ? 200 : 503);
  });
  // the fleet-wide series to any scrape; the per-account ones (every account's name and usage) only to one that sends --metrics-token
  app.get("/metrics", (c) => {
    const header = c.req.header("authorization");
    if (!deps.metricsToken || header === undefined) return deps.metrics.handler();
    if (!sameSecret(parseBearer(header) ?? "", deps.metricsToken))
      throw new AuthenticationError("invalid_api_key", "Authorization: not this scheduler's metrics token (--metrics-token); send none for the fleet-wide series");
    return deps.metrics.handlerWithAccounts();
  });
  // Browsers on the allowed origins: the preflight is answered before any key is asked for (browsers send none with it).
  if (deps.corsOrigins?.length) app.use("/v1/*", apiCors(deps.corsOrigins));
  // The API's description, without a key (it holds no user data; clients and tools read it first).
  app.get("/v1/openapi.json", (c) => c.json(openApiDocument(KILN_VERSION)));
  app.route(
    "/",
    dashboardRoutes({
      keys: deps.keys,
      mcp: deps.mcp,
      usage: deps.usage,
      fleet: deps.fleet,
      catalog: deps.catalog,
      maxBodyBytes: deps.maxBodyBytes,
      ...(deps.adminToken ? { adminToken: deps.adminToken } : {}),
    }),
  );
  // Anthropic's Messages API takes its key from x-api-key too and answers every refusal in Anthropic's shape:
  // mounted before the rest of /v1's middleware (which its answered requests never reach), with its own key check and limits
  const generation = {
    fleet: deps.fleet,
    models: deps.catalog,
    usage: deps.usage,
    tokens: deps.tokens,
    maxBodyBytes: deps.maxBodyBytes,
    logger: deps.logger,
    metrics: deps.metrics,
    cap: { inflight: deps.inflight, maxInflight: deps.maxInflight },
  };
  app.route("/v1/messages", messagesRoutes({ ...generation, keys: deps.keys, limiter: deps.limiter, standardRpm: deps.standardRpm }));
  app.use("/v1/*", authenticate(deps.keys), rateLimit(deps.limiter, deps.standardRpm));
  for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"]) app.use(path, tokenQuota(deps.tokens));
  app.route("/v1/chat/completions", chatRoutes(generation, { ...(deps.defaultMaxTokens ? { defaultMaxTokens: deps.defaultMaxTokens } : {}) }));
  app.route("/v1/responses", responsesRoutes(generation, { ...(deps.defaultMaxTokens ? { defaultMaxTokens: deps.defaultMaxTokens } : {}) }));
  app.route("/v1/completions", completionsRoutes(generation));
  app.route("/v1/embeddings", embeddingsRoutes(generation));
  app.route("/v1/audio", audioRoutes({ fleet: deps.fleet, usage: deps.usage, ...deps.audio, cap: generation.cap, logger: deps.logger }));
  app.route("/v1/usage", usageRoutes(deps.usage));
  app.route("/v1/models", modelRoutes(deps.fleet, deps.catalog, deps.modelStatus));
  app.route("/v1/mcp", mcpRoutes(deps.mcp, deps.maxBodyBytes));
  return app;
}

/** Response headers a browser client may read: the request id, ignored fields, rate limits. */
const EXPOSED_HEADERS = [
  "x-request-id",
  "x-kiln-ignored-fields",
  "retry-after",
  "x-ratelimit-limit-requests",
  "x-ratelimit-remaining-requests",
  "x-ratelimit-reset-requests",
  "x-ratelimit-limit-tokens",
  "x-ratelimit-remaining-tokens",
  "x-ratelimit-reset-tokens",
  "x-ratelimit-limit-tokens-day",
  "x-ratelimit-remaining-tokens-day",
  "x-ratelimit-reset-tokens-day",
  "x-ratelimit-limit-audio-seconds",
  "x-ratelimit-remaining-audio-seconds",
  "x-ratelimit-reset-audio-seconds",
  "x-ratelimit-limit-audio-seconds-day",
  "x-ratelimit-remaining-audio-seconds-day",
  "x-ratelimit-reset-audio-seconds-day",
];

/**
 * CORS for `/v1`: the allowed origins (or any), Bearer keys in `Authorization` (no cookies: no
 * credentials mode). The request headers a preflight asks for are allowed as asked: the `openai`
 * SDK in a browser sends its own (`X-Stainless-*`, `OpenAI-Organization`, …), and without
 * credentials a header grants nothing the key does not.
 *
 * Hono's `cors` answers preflights. Another request's grant is set with `setResponseHeader`, as
 * every header of an answer is, so that a streamed answer, whose head is written before Hono would
 * merge headers set on its context (core/http/event-stream.ts), carries it too.
 */
function apiCors(origins: readonly string[]): MiddlewareHandler<AppEnv> {
  const any = origins.includes("*");
  const preflight = cors({
    origin: any ? "*" : [...origins],
    allowMethods: ["GET", "POST", "PUT", "DELETE", "OPTIONS"],
    exposeHeaders: EXPOSED_HEADERS,
    maxAge: 600,
  });
  const exposed = EXPOSED_HEADERS.join(",");
  return (c, next) => {
    if (c.req.method === "OPTIONS") return preflight(c, next);
    const origin = c.req.header("origin");
    const granted = any ? "*" : origin !== undefined && origins.includes(origin) ? origin : undefined;
    if (granted) setResponseHeaders(c, { "access-control-allow-origin": granted, "access-control-expose-headers": exposed });
    if (!any) setResponseHeader(c, "vary", "Origin");
    return next();
  };
}

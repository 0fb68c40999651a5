/** The scheduler's public HTTP API (Hono): `/v1/chat/completions` and `/v1/models`. */
import { Hono } from "hono";
import type { AppEnv, HttpDeps } from "./env.js";
import { authenticate, rateLimit } from "./middleware/auth.js";
import { notFound, onError, requestId } from "../../core/http/index.js";
import { chatRoutes } from "./routes/chat.js";
import { modelRoutes } from "./routes/models.js";

export function createHttpApp(deps: HttpDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.onError(onError(deps.logger));
  app.notFound(notFound);
  app.use("*", requestId());
  app.use("/v1/*", authenticate(deps.keys), rateLimit(deps.limiter, deps.standardRpm));
  app.route("/v1/chat/completions", chatRoutes(deps.fleet, deps.maxBodyBytes, deps.logger));
  app.route("/v1/models", modelRoutes(deps.fleet));
  return app;
}

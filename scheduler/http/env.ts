import type { HttpBindings } from "@hono/node-server";
import type { RequestIdEnv } from "../../core/http/index.js";
import type { Logger } from "../../core/log.js";
import type { KeyIdentity, KeyService, Tier } from "../auth/index.js";
import type { Fleet } from "../fleet/index.js";
import type { ModelCatalog, ModelStatusSource } from "../catalog/index.js";
import type { UsageLedger } from "../usage/index.js";
import type { McpService } from "../mcp/index.js";
import type { SchedulerMetrics } from "../metrics.js";
import type { InflightCounter, RequestLimiter, TokenQuota } from "../ratelimit/index.js";

/** What the HTTP layer is given: the services it calls. */
export interface HttpDeps {
  keys: KeyService;
  /** Requests per minute, per account (sliding window). */
  limiter: RequestLimiter;
  /** Tokens per minute and per day, per account (chat, completions, embeddings). */
  tokens: TokenQuota;
  /** Chat completions in flight, per account. */
  inflight: InflightCounter;
  /** The cap on an account's chat completions in flight, by its tier (`--max-inflight`). */
  maxInflight: Readonly<Record<Tier, number>>;
  fleet: Fleet;
  /** The model catalog: the names `model` may give, what `/v1/models` lists, what the dashboard edits. */
  catalog: ModelCatalog;
  /** Shape B's `status` of each model in `/v1/models`. Default: the fleet's (`Fleet.statusOf`). */
  modelStatus?: ModelStatusSource;
  /** Where each answered request's usage is written (`GET /v1/usage` reads it). */
  usage: UsageLedger;
  logger: Logger;
  /** `/v1/audio`: where uploads are held, the largest file, the uploads held at once, the free disk they leave. */
  audio: { spoolDir: string; maxFileBytes: number; maxUploads: number; maxUploadsPerAccount: number; minFreeBytes?: number; quota?: TokenQuota };
  /** Largest accepted JSON body, in bytes. */
  maxBodyBytes: number;
  /** `max_tokens` of a chat completion that gives none; undefined or 0: up to the end of the context. */
  defaultMaxTokens?: number;
  /** Browser origins allowed to call `/v1` (CORS; `*` for any). Default none: no CORS headers. */
  corsOrigins?: readonly string[];
  /** Requests per minute of the standard tier. */
  standardRpm: number;
  metrics: SchedulerMetrics;
  /** `--metrics-token`: a `/metrics` scrape sending it as a bearer also gets the per-account series. Default none. */
  metricsToken?: string;
  /** MCP configurations, secrets and tests. */
  mcp: McpService;
  /** The dashboard's admin token; no token, no dashboard API. */
  adminToken?: string;
  /** Readiness: the store is open (and whatever else the scheduler needs to serve). */
  ready: () => { ready: boolean; checks: Record<string, boolean> };
}

/** Hono's typed context variables. */
export interface AppEnv extends RequestIdEnv {
  Bindings: HttpBindings;
  Variables: {
    requestId: string;
    identity: KeyIdentity;
  };
}

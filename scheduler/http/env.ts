import type { RequestIdEnv } from "../../core/http/index.js";
import type { Logger } from "../../core/log.js";
import type { KeyIdentity, KeyService } from "../auth/index.js";
import type { Fleet } from "../fleet/index.js";
import type { McpStore } from "../mcp/index.js";
import type { SchedulerMetrics } from "../metrics.js";
import type { RateLimiter } from "../ratelimit/index.js";

/** What the HTTP layer is given: the services it calls. */
export interface HttpDeps {
  keys: KeyService;
  limiter: RateLimiter;
  fleet: Fleet;
  logger: Logger;
  /** Largest accepted JSON body, in bytes. */
  maxBodyBytes: number;
  /** Requests per minute of the standard tier. */
  standardRpm: number;
  metrics: SchedulerMetrics;
  mcp: McpStore;
  /** How long `POST /v1/mcp/test` waits for a server. */
  mcpTestTimeoutMs: number;
  /** The dashboard's admin token; no token, no dashboard API. */
  adminToken?: string;
  /** Readiness: the store is open (and whatever else the scheduler needs to serve). */
  ready: () => { ready: boolean; checks: Record<string, boolean> };
}

/** Hono's typed context variables. */
export interface AppEnv extends RequestIdEnv {
  Variables: {
    requestId: string;
    identity: KeyIdentity;
  };
}

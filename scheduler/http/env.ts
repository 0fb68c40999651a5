import type { RequestIdEnv } from "../../core/http/index.js";
import type { Logger } from "../../core/log.js";
import type { KeyIdentity, KeyService } from "../auth/index.js";
import type { Fleet } from "../fleet/index.js";
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
}

/** Hono's typed context variables. */
export interface AppEnv extends RequestIdEnv {
  Variables: {
    requestId: string;
    identity: KeyIdentity;
  };
}

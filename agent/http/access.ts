/**
 * Who may do what on port 7860. The agent token (`--agent-token`), when set, opens every `/api`
 * route; a job's handle (returned once at submission) opens that job's own routes (status,
 * result, cancel, delete), with or without a token. Without a token (loopback, or
 * `--agent-insecure`), submitting and the instance's own routes are open, reading a job needs its
 * handle, and listing jobs is refused.
 */
import type { MiddlewareHandler } from "hono";
import { sameSecret } from "../../core/digest.js";
import { parseBearer } from "../../core/http/index.js";
import { AuthenticationError, PermissionError } from "../../core/errors.js";
import type { JobService } from "../jobs/index.js";

/** What the caller proved: the agent token (`operator`), or nothing yet (a job handle is checked per job). */
export interface AccessVariables {
  /** Whether this instance has a token at all. */
  guarded: boolean;
  operator: boolean;
  credential: string | undefined;
}

const MISSING = () => new AuthenticationError("missing_api_key", 'Authorization: this instance needs "Bearer <token>"');

/** Reads the caller's bearer; with a token configured, routes not about one job need that token. */
export function access(token: string | undefined, isJobRoute: (path: string) => boolean): MiddlewareHandler<{ Variables: AccessVariables }> {
  return async (c, next) => {
    const header = c.req.header("authorization");
    const credential = parseBearer(header);
    if (header && !credential) throw new AuthenticationError("invalid_api_key", 'Authorization: expected "Bearer <token>"');
    const operator = token !== undefined && credential !== undefined && sameSecret(credential, token);
    c.set("guarded", token !== undefined);
    c.set("operator", operator);
    c.set("credential", credential);
    if (token !== undefined && !operator && !isJobRoute(c.req.path)) {
      if (!credential) throw MISSING();
      throw new AuthenticationError("invalid_api_key", "Authorization: the bearer token is not this instance's");
    }
    await next();
  };
}

/** Allows the agent token or job `id`'s own handle. */
export function requireJob(c: { var: AccessVariables }, jobs: JobService, id: string): void {
  if (c.var.operator) return;
  const credential = c.var.credential;
  if (!credential)
    throw new AuthenticationError(
      "missing_job_handle",
      'Authorization: reading a job needs "Bearer <handle>" (the handle returned when it was submitted) or the instance\'s token',
    );
  if (!jobs.ownsJob(id, credential)) throw new AuthenticationError("invalid_job_handle", `Authorization: not the handle of job "${id}" (nor the instance's token)`);
}

/**
 * Allows only the agent token. (With one configured, `access` has already refused every other
 * caller of such a route; without one, the route is not offered.)
 */
export function requireOperator(c: { var: AccessVariables }, what: string): void {
  if (c.var.operator) return;
  throw new PermissionError("token_required", `${what} needs this instance's token (--agent-token)`);
}

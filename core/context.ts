/**
 * The request or job a piece of work belongs to, carried across awaits (AsyncLocalStorage): the
 * process-level fault handler reads it, so an unhandled rejection is logged with the request id
 * or job id that caused it.
 */
import { AsyncLocalStorage } from "node:async_hooks";

/** Fields that name the work: `request_id`, `job`. */
export type WorkContext = Readonly<Record<string, string>>;

const storage = new AsyncLocalStorage<WorkContext>();

/**
 * Runs `fn` in a context of exactly `fields` (not merged with the caller's: a job started from
 * the end of another, or from a request, belongs to itself).
 */
export function withContext<T>(fields: WorkContext, fn: () => T): T {
  return storage.run({ ...fields }, fn);
}

/** The context of the work running now (empty outside any). */
export function currentContext(): WorkContext {
  return storage.getStore() ?? {};
}

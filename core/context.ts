/**
 * The job a piece of work belongs to, carried across awaits (AsyncLocalStorage): the process-level
 * fault handler reads it, so an unhandled rejection is logged with the id of the job that caused
 * it. Only long work runs in a context (an agent's transcription jobs): on Node 20 the first
 * `withContext` puts a hook on every promise the process makes from then on, a cost per request
 * the HTTP servers do not pay (core/http/request-id.ts).
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

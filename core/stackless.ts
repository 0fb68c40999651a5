/**
 * Synchronous work whose refusals are built without stack traces. An `ApiError` is answered (its
 * body and status), never logged, so its stack is never read; capturing one cost about 3–4 µs of
 * each refused request (bench:gateway, docs/performance.md "Control plane"), more than the rest of
 * the refusal. Anything else `fn` throws is a fault, logged with its stack: `fn` is run again with
 * stack traces for it (it must be pure, as a body's validation is).
 */
import { ApiError } from "./errors.js";

export function withoutStackTraces<T>(fn: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return fn();
  } catch (err) {
    if (err instanceof ApiError) throw err;
    Error.stackTraceLimit = limit;
    throw again(fn, err);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** What `fn` throws when run again (with stack traces), else `first`. */
function again(fn: () => unknown, first: unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return first;
}

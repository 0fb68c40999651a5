/**
 * Helpers of request-body validation (core/schema.ts runs the zod schemas), each error naming the offending
 * field's path first (`messages[0].role: …`), as the error contract (core/errors.ts) asks.
 */
import { InvalidRequestError } from "./errors.js";

/**
 * Deepest nesting of arrays and objects a request's JSON may have (its body, and JSON carried in its
 * strings). JSON.parse takes tens of thousands of levels, but code that walks the value recursively
 * (JSON.stringify, schema validators, chat templates) overflows the stack on them; no request of this
 * API needs more than a few.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether `value` nests arrays and objects more than `limit` deep (walked without recursion). */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (depth + 1 > limit) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

/** The JSON type of a parsed value, as a client would name it. */
export const typeName = (v: unknown): string => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

/** Characters of a refused string a message quotes. */
const QUOTED_CHARS = 40;

/**
 * A refused value as a message shows it: a number, boolean or null as JSON; a string quoted, cut at
 * QUOTED_CHARS with its length; an array or object by its type only (writing one out could be
 * megabytes, or overflow the stack when deeply nested).
 */
export function describeValue(v: unknown): string {
  if (typeof v === "string") return v.length > QUOTED_CHARS ? `${JSON.stringify(v.slice(0, QUOTED_CHARS)).slice(0, -1)}…" (${v.length} characters)` : JSON.stringify(v);
  if (typeof v === "object" && v !== null) return typeName(v);
  return String(v);
}

/** 400 `invalid_type`: `field` held `value` where `expected` belongs. */
export function wrongType(field: string, expected: string, value: unknown): never {
  throw new InvalidRequestError("invalid_type", `${field}: expected ${expected}, got ${typeName(value)}`, field);
}

/** The body as an object of members, or a 400 naming `body`. */
export function jsonObject(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) wrongType("body", "a JSON object", body);
  return body as Record<string, unknown>;
}

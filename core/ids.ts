/**
 * Random identifiers for answers (completion, message, response and function-call ids). They come
 * from the process's cryptographic generator, drawn from a buffer it fills 4 KiB at a time (Node's
 * `randomUUID()` keeps a buffer of its own likewise): a `randomBytes` call for each id cost an
 * answer's first event 12 µs on its way to the client (a CPU profile of `kiln dev`). No byte is
 * handed out twice. The ids are names, not secrets: no capability rests on one.
 */
import { randomFillSync } from "node:crypto";

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let next = 0;

/** `bytes` random bytes (a whole number, 1 to 4,096) as base64url (default) or hex. */
export function randomId(bytes: number, encoding: "base64url" | "hex" = "base64url"): string {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > POOL_BYTES) throw new RangeError(`randomId: ${bytes} bytes; 1 to ${POOL_BYTES} whole bytes`);
  if (next + bytes > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(POOL_BYTES));
    next = 0;
  }
  const id = pool.toString(encoding, next, next + bytes);
  next += bytes;
  return id;
}

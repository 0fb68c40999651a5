/**
 * SHA-256 of a secret, for storing it without keeping it (API keys, job handles) and for
 * comparing secrets in constant time (equal-length digests, whatever the inputs' lengths); and
 * the SHA-256 of a file, as model hubs publish it.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { createReadStream } from "node:fs";

export const sha256 = (s: string): Buffer => createHash("sha256").update(s).digest();

export const sha256Hex = (s: string): string => sha256(s).toString("hex");

/** Whether two secrets are equal, in time independent of where they differ (and of their lengths). */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(sha256(given), sha256(expected));
}

/** Whether `given` hashes to the stored hex digest `storedHex`, in constant time. */
export function matchesDigest(given: string, storedHex: string): boolean {
  const stored = Buffer.from(storedHex, "hex");
  const digest = sha256(given);
  return stored.length === digest.length && timingSafeEqual(digest, stored);
}

/** SHA-256 of a file's bytes (hex), streamed: a multi-gigabyte file never sits in memory. */
export async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 ** 2 })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/**
 * SHA-256 of a secret, for storing it without keeping it (API keys, job handles) and for
 * comparing secrets in constant time (equal-length digests, whatever the inputs' lengths).
 */
import { createHash, timingSafeEqual } from "node:crypto";

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

/** Account tiers (core/tiers.ts) and their requests-per-minute limits (README, "Limits (scheduler)"). */
import { TIERS, type Tier } from "../../core/tiers.js";

export { isTier, TIERS, type Tier } from "../../core/tiers.js";

/** True when `tier` is `minimum` or above. */
export function tierAtLeast(tier: Tier, minimum: Tier): boolean {
  return TIERS.indexOf(tier) >= TIERS.indexOf(minimum);
}

/**
 * Requests per minute for a key: its own figure when set (enterprise accounts must have one),
 * else the tier's: free 100, pro 1000, standard `standardRpm` (the spec gives none).
 */
export function requestsPerMinute(tier: Tier, own: number | null, standardRpm: number): number {
  if (own !== null) return own;
  switch (tier) {
    case "free":
      return 100;
    case "standard":
      return standardRpm;
    case "pro":
      return 1000;
    case "enterprise":
      return 1000;
  }
}

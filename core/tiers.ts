/** The account tiers, lowest first: the vocabulary configuration and the scheduler share (the limits of each: scheduler/auth/tiers.ts). */
export const TIERS = ["free", "standard", "pro", "enterprise"] as const;
export type Tier = (typeof TIERS)[number];

export function isTier(value: string): value is Tier {
  return (TIERS as readonly string[]).includes(value);
}

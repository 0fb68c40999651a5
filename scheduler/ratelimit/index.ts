/** Fair use per account: requests per minute and in flight (`./limits.ts`), tokens per minute and per day (`./tokens.ts`). */
export { CHAT_INFLIGHT_REFUSAL, InflightLimiter, rateHeaders, RateLimiter, WINDOW_MS, type InflightCounter, type RateDecision, type RequestLimiter } from "./limits.js";
export { AUDIO_SECONDS, MemoryTokenCounter, TokenQuota, TOKENS, type QuotaUnit, type TokenCounter, type TokenQuotaOptions } from "./tokens.js";

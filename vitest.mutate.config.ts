/**
 * The unit suites that `npm run mutate` (StrykerJS) runs against each mutant: fast, in-process, no
 * engines, no servers. Every module in stryker.config.json's `mutate` list has its tests here.
 */
import { defineConfig } from "vitest/config";

export const MUTATION_SUITES = [
  "scheduler/chat/validate.test.ts",
  "scheduler/ratelimit/index.test.ts",
  "scheduler/auth/keys.test.ts",
  "speech/formats.test.ts",
  "agent/asr/chunks.test.ts",
  "agent/asr/words.test.ts",
  "agent/asr/speakers.test.ts",
  "agent/link/coalesce.test.ts",
  "agent/link/backoff.test.ts",
  "config/config.test.ts",
  "config/max-inflight.test.ts",
  "config/rules.test.ts",
  "config/node-tokens.test.ts",
];

export default defineConfig({
  test: {
    include: MUTATION_SUITES,
    testTimeout: 20_000,
  },
});

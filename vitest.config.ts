import { defineConfig } from "vitest/config";

const UNITS = "{agent,scheduler,config,core,cli,models,speech,fabricate,scripts}/**/*.test.ts";

/**
 * A second lane, beside the main one: the soak (mostly waiting on its processes) and control-plane
 * suites that start schedulers and small chat agents but no whisper work, so that they do not
 * compete with the transcription suites for the same kind of time.
 */
const SIDE = [
  "test/soak.test.ts",
  "test/fleet-security.test.ts",
  "test/mcp.test.ts",
  "test/mcp-hostile.test.ts",
  "test/usage.test.ts",
  "test/cli.test.ts",
  "test/dashboard.test.ts",
  "test/openai-features.test.ts",
  "test/chat-api.test.ts",
  "test/openai-client.test.ts",
  "test/auth.test.ts",
  "scheduler/store/store.test.ts",
  "scheduler/ratelimit/redis.test.ts",
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two projects run side by side, each one file at a time: suites run real native engines and
    // real sockets on 2 cores, and one file per lane keeps their timings honest.
    projects: [
      {
        extends: true,
        test: { name: "main", include: ["test/**/*.test.ts", UNITS], exclude: SIDE, globalSetup: ["test/helpers/global-setup.ts"], fileParallelism: false },
      },
      {
        extends: true,
        test: { name: "side", include: SIDE, globalSetup: ["test/helpers/global-setup.ts"], fileParallelism: false },
      },
    ],
  },
});

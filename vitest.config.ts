import { defineConfig } from "vitest/config";

const UNITS = "{agent,scheduler,config,core,cli,hub,models,speech,fabricate,scripts}/**/*.test.ts";

/**
 * Files that may run two at a time: the soak (which mostly waits on its processes) and the
 * control-plane suites that start schedulers and small chat agents but no whisper work.
 */
const PAIRED = [
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
  "test/fleet-resilience.test.ts",
  "test/many-schedulers.test.ts",
  "test/shared-limits.test.ts",
  "test/fair-use.test.ts",
  "test/drain.test.ts",
  "test/operations.test.ts",
  "test/openapi.test.ts",
  "test/fleet-messages.test.ts",
  "{scheduler,config,core,cli,hub,models,speech}/**/*.test.ts",
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // vitest runs the `paired` project first, two files at a time (the soak beside the others), then
    // the `serial` one a file at a time: its suites run whisper and the other native engines, whose
    // timings two files at once on 2 cores would not keep honest.
    projects: [
      { extends: true, test: { name: "paired", include: PAIRED, globalSetup: ["test/helpers/global-setup.ts"], maxWorkers: 2 } },
      {
        extends: true,
        test: { name: "serial", include: ["test/**/*.test.ts", UNITS], exclude: PAIRED, globalSetup: ["test/helpers/global-setup.ts"], fileParallelism: false },
      },
    ],
  },
});

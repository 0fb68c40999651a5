import { defineConfig } from "vitest/config";

const UNITS = "{agent,scheduler,config,core,cli,hub,models,speech,fabricate,scripts}/**/*.test.ts";

/**
 * Files that may run two at a time: the soak (which mostly waits on its processes) and the
 * control-plane suites that start schedulers and small chat agents but no whisper work.
 */
const PAIRED = [
  "test/soak.test.ts",
  "test/soak-hostile.test.ts",
  "test/fleet-security.test.ts",
  "test/mcp.test.ts",
  "test/mcp-hostile.test.ts",
  "test/mcp-sandbox.test.ts",
  "test/docs.test.ts",
  "test/usage.test.ts",
  "test/cli.test.ts",
  "test/dashboard.test.ts",
  "test/catalog.test.ts",
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
    // the `serial` one a file at a time, then `units` a file at a time: their suites run whisper and the
    // other native engines, whose timings two files at once on 2 cores would not keep honest.
    // `serial`, the integration suites of test/, runs its files in one worker that keeps the modules
    // it imported (isolate: false): each file imported the agent, the scheduler and the engines'
    // bindings anew (about 2 s a file), and none changes the process's environment or native state
    // for the next. The unit suites keep a process each (`units`): some load node-llama-cpp or the
    // whisper addon in their own process and check what loaded, or set the environment for a whole file.
    // (vitest runs a one-worker project without isolation in a group of its own: groupOrder 1, after
    // `paired`'s 0; it queues every isolated one-file-at-a-time project last, in one shared queue.)
    projects: [
      { extends: true, test: { name: "paired", include: PAIRED, globalSetup: ["test/helpers/global-setup.ts"], maxWorkers: 2 } },
      {
        extends: true,
        test: {
          name: "serial",
          include: ["test/**/*.test.ts"],
          exclude: PAIRED,
          globalSetup: ["test/helpers/global-setup.ts"],
          fileParallelism: false,
          isolate: false,
          sequence: { groupOrder: 1 },
        },
      },
      { extends: true, test: { name: "units", include: [UNITS], exclude: PAIRED, globalSetup: ["test/helpers/global-setup.ts"], fileParallelism: false } },
    ],
  },
});

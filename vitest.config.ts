import { defineConfig } from "vitest/config";

/** Suites that run the whole fleet as processes for a long time: a project of their own, beside the rest. */
const SOAK = ["test/soak.test.ts"];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two projects run side by side: the soak (mostly waiting on its processes) beside the rest.
    projects: [
      {
        extends: true,
        test: {
          name: "suite",
          include: ["test/**/*.test.ts", "{agent,scheduler,config,core,cli,models,speech,fabricate,scripts}/**/*.test.ts"],
          exclude: SOAK,
          globalSetup: ["test/helpers/global-setup.ts"],
          // Suites run real native engines and real sockets on 2 cores: one file at a time keeps timings honest.
          fileParallelism: false,
        },
      },
      // the soak makes its own models and temporary folder, and removes it
      { extends: true, test: { name: "soak", include: SOAK, fileParallelism: false } },
    ],
  },
});

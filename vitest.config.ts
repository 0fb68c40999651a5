import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "{agent,scheduler,config,core,cli,models,speech,fabricate,scripts}/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    // Suites run real native engines and real sockets on 2 cores: one file at a time keeps timings honest.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

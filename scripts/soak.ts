/**
 * `npm run soak -- [--seconds N] [--seed S] [--fault-every S]`: the fleet under seeded faults
 * (scripts/lib/soak.ts). `npm run soak -- --hostile [--seconds N] [--seed S]`: the scheduler under a
 * hostile tenant and a lying node (scripts/lib/hostile-soak.ts). Prints each step and the report;
 * exits 1 when a check failed.
 */
import { parseArgs } from "node:util";
import { runHostileSoak } from "./lib/hostile-soak.js";
import { runSoak } from "./lib/soak.js";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "300" },
    seed: { type: "string", default: "1" },
    "fault-every": { type: "string", default: "10" },
    hostile: { type: "boolean", default: false },
  },
});
const number = (name: string, raw: string): number => {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) {
    console.error(`soak: --${name} must be a positive number, got "${raw}"`);
    process.exit(2);
  }
  return n;
};

const log = (line: string) => console.log(`${new Date().toISOString()} ${line}`);
const seconds = number("seconds", values.seconds);
const seed = number("seed", values.seed);
const report = values.hostile
  ? await runHostileSoak({ seconds, seed, log })
  : await runSoak({ seconds, seed, faultEverySeconds: number("fault-every", values["fault-every"]), log });
console.log(JSON.stringify(report, null, 2));
console.log(report.passed ? "soak passed" : `soak FAILED: ${report.failures.length} check(s)`);
process.exit(report.passed ? 0 : 1);

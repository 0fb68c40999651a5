/**
 * The hostile soak (scripts/lib/hostile-soak.ts) for 25 s of attacks with a fixed seed: a tenant
 * hammering the MCP test with malformed and flooding servers and a lying node, beside an honest
 * tenant's chat and transcription. The report's checks are the test.
 */
import { describe, expect, it } from "vitest";
import { runHostileSoak } from "../scripts/lib/hostile-soak.js";

describe("hostile soak", () => {
  it("the scheduler never restarts, the honest tenant keeps its latency bound and is charged what it used, the hostile one no more than the bounds", async () => {
    const lines: string[] = [];
    const report = await runHostileSoak({ seconds: 25, calmSeconds: 8, seed: 7, log: (l) => lines.push(l) });
    expect(report.failures, `${lines.join("\n")}\n${JSON.stringify(report, null, 2)}`).toEqual([]);
    expect(report.passed).toBe(true);
    expect(report.scheduler.starts).toBe(1);
    expect(report.mcp.tests).toBeGreaterThan(10);
    expect(report.liar.refused["4294967295 slots"]).toBeGreaterThan(0);
    expect(report.liar.linksClosed).toBeGreaterThan(0);
    expect(report.liar.completions).toBeGreaterThan(0);
    expect(report.charges.hostile.ledger.completion_tokens).toBeLessThanOrEqual(report.liar.completions * report.charges.hostile.maxTokensEach);
  }, 240_000);
});

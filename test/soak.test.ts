/**
 * The soak (scripts/lib/soak.ts) for 60 s with a fixed seed: a scheduler and two agents as
 * processes, chat streams and transcription jobs, while agents and the scheduler are stopped,
 * killed and restarted. Nothing accepted may be lost, no chat request may hang, no file may be left.
 */
import { describe, expect, it } from "vitest";
import { runSoak } from "../scripts/lib/soak.js";

describe("soak", () => {
  it("loses no accepted job, hangs no chat request and leaves no file across 60 s of seeded faults (seed 4: the scheduler and the agents each stopped and killed)", async () => {
    const lines: string[] = [];
    const report = await runSoak({ seconds: 60, seed: 4, faultEverySeconds: 8, log: (line) => lines.push(line) });
    expect(report.failures, lines.join("\n")).toEqual([]);
    expect(report.passed).toBe(true);
    // the run tested something: faults of both kinds, jobs accepted and resumed, chats completed
    expect(report.faults["agent SIGKILL"] + report.faults["scheduler SIGKILL"]).toBeGreaterThan(0);
    expect(report.faults["agent SIGTERM"] + report.faults["scheduler SIGTERM"]).toBeGreaterThan(0);
    expect(report.jobs.accepted).toBeGreaterThan(5);
    expect(report.jobs.completed).toBe(report.jobs.accepted);
    expect(report.jobs.interrupted).toBeGreaterThan(0);
    expect(report.jobs.resumed).toBeGreaterThan(0);
    expect(report.chat.completed).toBeGreaterThan(10);
  }, 600_000);
});

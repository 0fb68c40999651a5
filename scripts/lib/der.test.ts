import { describe, expect, it } from "vitest";
import { diarizationErrorRate, parseRttm } from "./der.js";

describe("diarizationErrorRate", () => {
  const reference = parseRttm("SPEAKER f 1 0.0 2.0 <NA> <NA> alice <NA> <NA>\nSPEAKER f 1 2.0 2.0 <NA> <NA> bob <NA> <NA>\n");
  it("is 0 for the same turns under other labels", () => {
    const r = diarizationErrorRate(reference, [
      { speaker: "SPEAKER_00", start: 0, end: 2 },
      { speaker: "SPEAKER_01", start: 2, end: 4 },
    ]);
    expect(r.der).toBe(0);
    expect(r.mapping).toEqual({ SPEAKER_00: "alice", SPEAKER_01: "bob" });
  });
  it("counts missed speech, false alarms and confusion", () => {
    const r = diarizationErrorRate(reference, [
      { speaker: "A", start: 0, end: 3 },
      { speaker: "B", start: 4, end: 5 },
    ]);
    expect(r.missed).toBeCloseTo(1, 1);
    expect(r.falseAlarm).toBeCloseTo(1, 1);
    expect(r.confusion).toBeCloseTo(1, 1);
    expect(r.der).toBeCloseTo(3 / 4, 2);
  });
});

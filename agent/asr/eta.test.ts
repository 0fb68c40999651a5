import { describe, expect, it } from "vitest";
import { PhaseSpeeds, RunProgress } from "./eta.js";

/** A run on a clock the test moves. */
function run(plan: Partial<ConstructorParameters<typeof RunProgress>[1]> = {}, speeds = new PhaseSpeeds()) {
  let now = 0;
  const clock = new RunProgress(speeds, { audioSeconds: 600, diarization: false, translation: false, model: "base", ...plan }, () => now);
  return { clock, speeds, tick: (seconds: number) => (now += seconds * 1000) };
}

describe("RunProgress", () => {
  it("within a phase, the ETA falls while progress rises, at the speed observed in that phase", () => {
    const { clock, tick } = run();
    clock.enter("decoding");
    clock.finish("decoding");
    clock.enter("detecting_speech");
    clock.finish("detecting_speech");
    clock.enter("transcribing", 300);
    const seen: { progress: number; eta: number }[] = [];
    for (let s = 1; s <= 9; s++) {
      tick(10);
      clock.advance("transcribing", s * 30); // 3 s of speech per second
      const { progress, etaSeconds } = clock.snapshot();
      seen.push({ progress, eta: etaSeconds });
    }
    for (let i = 1; i < seen.length; i++) {
      expect(seen[i]!.progress).toBeGreaterThan(seen[i - 1]!.progress);
      expect(seen[i]!.eta).toBeLessThan(seen[i - 1]!.eta);
    }
    expect(seen[0]!.eta).toBe(90); // 270 s of speech left at the 3×/s observed, not the default 2×/s
    expect(seen.at(-1)!.eta).toBe(10);
  });

  it("moves with time before the phase has moved: its expected time less the time it has run, never below a second", () => {
    const { clock, tick } = run();
    clock.enter("decoding", 600); // default speed: 200 s of audio a second, so 3 s
    const first = clock.snapshot().etaSeconds;
    tick(2);
    const later = clock.snapshot().etaSeconds;
    expect(later).toBe(first - 2);
    tick(60);
    const decodeLeft = clock.snapshot().etaSeconds - (600 / 100 + 600 / 2); // voice detection and whisper still ahead
    expect(decodeLeft).toBe(1);
  });

  it("a later run of the same node starts from the speeds the earlier one measured", () => {
    const speeds = new PhaseSpeeds();
    const first = run({}, speeds);
    first.clock.enter("transcribing", 100);
    first.tick(10); // 10 s of speech a second
    first.clock.finish("transcribing");
    expect(speeds.get("transcribing", "base")).toBe(10);
    expect(speeds.get("transcribing", "small")).toBe(2); // another model: the default
    const second = run({}, speeds);
    second.clock.enter("transcribing", 200);
    expect(second.clock.snapshot().etaSeconds).toBe(20);
  });

  it("a resumed phase measures its speed from the work it does now, not the work kept", () => {
    const { clock, tick } = run();
    clock.enter("transcribing", 300, 240); // 240 s kept from the run before
    tick(10);
    clock.advance("transcribing", 270); // 30 s in 10 s
    expect(clock.snapshot().etaSeconds).toBe(10);
  });

  it("waits for the later of whisper and diarization beside it, and shows diarizing while waiting", () => {
    const { clock, tick } = run({ diarization: true, audioSeconds: 100 });
    clock.enter("detecting_speech");
    clock.startBackground("diarizing"); // default 10 s of audio a second: 10 s
    clock.finish("detecting_speech");
    clock.enter("transcribing", 10);
    tick(1);
    clock.advance("transcribing", 10);
    clock.finish("transcribing");
    clock.enter("diarizing");
    expect(clock.phase).toBe("diarizing");
    expect(clock.snapshot().etaSeconds).toBe(9);
    const before = clock.snapshot().progress;
    tick(4);
    expect(clock.snapshot().progress).toBeGreaterThan(before);
    expect(clock.snapshot().etaSeconds).toBe(5);
  });
});

/**
 * Progress and a measured ETA for one transcription, phase by phase.
 *
 * Each phase has a share of the progress bar and an amount of work: seconds of audio for decoding,
 * voice detection and diarization, seconds of speech for whisper, segments for translation. Within
 * the phase running now, the time left is its work left at the speed observed in this phase so far;
 * before the phase has moved, and for the phases still ahead, it is their work at the speed this
 * node measured in earlier runs (`PhaseSpeeds`), or a cautious default before any. Diarization runs
 * beside voice detection and whisper: the ETA waits for the later of the two.
 */

/** What a job is doing now (`GET /api/status` `phase`). */
export type JobPhase = "queued" | "downloading_model" | "decoding" | "detecting_speech" | "diarizing" | "transcribing" | "translating" | "writing";

/** The phases a transcription run itself goes through, in order. */
export type RunPhase = Exclude<JobPhase, "queued" | "downloading_model" | "writing">;

/** Work per wall second assumed before a node has measured a phase. */
const DEFAULT_SPEEDS: Record<RunPhase, number> = {
  decoding: 200, // seconds of audio per second
  detecting_speech: 100,
  diarizing: 10,
  transcribing: 2, // seconds of speech per second
  translating: 1, // segments per second
};

/** The phases in the order a run ends them (diarization, started beside voice detection, ends after whisper). */
const ORDER: readonly RunPhase[] = ["decoding", "detecting_speech", "transcribing", "diarizing", "translating"];

/** The least a phase that has not ended is said to take still, in seconds. */
const MIN_LEFT = 1;

/** Work per wall second of each phase on this node, measured over runs (a moving average per key). */
export class PhaseSpeeds {
  private readonly measured = new Map<string, number>();

  /** The speed of `phase` (for `variant`: whisper's model), or the default before any run measured it. */
  get(phase: RunPhase, variant = ""): number {
    return this.measured.get(`${phase}:${variant}`) ?? DEFAULT_SPEEDS[phase];
  }

  learn(phase: RunPhase, variant: string, work: number, seconds: number): void {
    if (!(work > 0) || !(seconds > 0.05)) return; // too little to measure
    const key = `${phase}:${variant}`;
    const speed = work / seconds;
    const previous = this.measured.get(key);
    this.measured.set(key, previous === undefined ? speed : 0.7 * previous + 0.3 * speed);
  }
}

/** A phase of one run: its share of the bar, its work, and how far it got. */
interface Step {
  phase: RunPhase;
  share: number;
  work: number;
  done: number;
  /** Work already done when the phase started (a resumed run): not counted in its observed speed. */
  base: number;
  started?: number;
  ended?: number;
}

/** Where a run stands: what `onProgress` hears. */
export interface RunSnapshot {
  phase: RunPhase;
  /** 0–1. */
  progress: number;
  /** Whole seconds left. */
  etaSeconds: number;
}

export interface RunPlan {
  /** Seconds of audio (a first guess until the decoded length is known). */
  audioSeconds: number;
  diarization: boolean;
  translation: boolean;
  /** Whisper's model: its speed is measured apart. */
  model: string;
}

export class RunProgress {
  private readonly steps = new Map<RunPhase, Step>();
  private current: RunPhase = "decoding";

  constructor(
    private readonly speeds: PhaseSpeeds,
    private readonly plan: RunPlan,
    private readonly now: () => number = Date.now,
  ) {
    const extra = (plan.diarization ? 0.1 : 0) + (plan.translation ? 0.1 : 0);
    const add = (phase: RunPhase, share: number, work: number) => this.steps.set(phase, { phase, share, work, done: 0, base: 0 });
    add("decoding", 0.05, plan.audioSeconds);
    add("detecting_speech", 0.05, plan.audioSeconds);
    if (plan.diarization) add("diarizing", 0.1, plan.audioSeconds);
    add("transcribing", 0.9 - extra, plan.audioSeconds);
    if (plan.translation) add("translating", 0.1, Math.max(1, plan.audioSeconds / 5));
  }

  /** The phase shown now. */
  get phase(): RunPhase {
    return this.current;
  }

  /**
   * Starts `phase` in the foreground (ending the ones before it), with its work when now known and
   * what a previous run already did of it. Diarization started this way is being waited for.
   */
  enter(phase: RunPhase, work?: number, alreadyDone = 0): void {
    const step = this.step(phase);
    for (const before of ORDER.slice(0, ORDER.indexOf(phase))) this.finish(before);
    this.current = phase;
    if (work !== undefined) step.work = work;
    step.base = step.done = Math.max(step.done, alreadyDone);
    step.started ??= this.now();
  }

  /** Starts diarization beside the foreground phases. */
  startBackground(phase: RunPhase): void {
    this.step(phase).started ??= this.now();
  }

  /** Sets how much of `phase` is done (its own units). */
  advance(phase: RunPhase, done: number): void {
    const step = this.step(phase);
    step.done = Math.min(step.work, Math.max(step.done, done));
  }

  /**
   * Revises the work of the phases not yet ended from the audio's length (a guess from the probe,
   * then the decoded length): seconds of audio for each, a segment per 5 s for translation.
   */
  expectAudio(seconds: number): void {
    for (const phase of ["decoding", "detecting_speech", "diarizing", "transcribing"] as const) this.expect(phase, seconds);
    this.expect("translating", seconds / 5);
  }

  /** Revises the work a phase will take (the speech found, the segments to translate). */
  expect(phase: RunPhase, work: number): void {
    const step = this.steps.get(phase);
    if (step && step.ended === undefined) step.work = Math.max(work, step.done);
  }

  /** Ends `phase`, recording its observed speed for later runs. */
  finish(phase: RunPhase): void {
    const step = this.steps.get(phase);
    if (!step || step.ended !== undefined) return;
    step.ended = this.now();
    step.done = step.work;
    if (step.started !== undefined) this.speeds.learn(phase, this.variant(phase), step.work - step.base, (step.ended - step.started) / 1000);
  }

  /** Ends the run: every phase done. */
  complete(): void {
    for (const phase of this.steps.keys()) this.finish(phase);
  }

  snapshot(): RunSnapshot {
    let progress = 0;
    for (const step of this.steps.values()) progress += step.share * this.fraction(step);
    const order: RunPhase[] = ["decoding", "detecting_speech", "transcribing"];
    // the foreground's time to the end of whisper, and diarization's beside it: the later of the two
    let foreground = 0;
    for (const phase of order) foreground += this.left(this.steps.get(phase)!);
    const diarizing = this.steps.get("diarizing");
    const joined = Math.max(foreground, diarizing ? this.left(diarizing) : 0);
    const translating = this.steps.get("translating");
    const eta = joined + (translating ? this.left(translating) : 0);
    return { phase: this.current, progress: Math.min(1, progress), etaSeconds: Math.max(0, Math.ceil(eta)) };
  }

  private step(phase: RunPhase): Step {
    const step = this.steps.get(phase);
    if (!step) throw new Error(`phase ${phase} is not part of this run`);
    return step;
  }

  private variant(phase: RunPhase): string {
    return phase === "transcribing" ? this.plan.model : "";
  }

  private fraction(step: Step): number {
    if (step.ended !== undefined) return 1;
    if (step.work <= 0) return 0;
    if (step.phase === "diarizing" && step.started !== undefined) {
      // no progress of its own: its expected share of the time so far, short of done
      const elapsed = (this.now() - step.started) / 1000;
      return Math.min(0.95, (elapsed * this.speeds.get("diarizing")) / step.work);
    }
    return Math.min(1, step.done / step.work);
  }

  /** Seconds `step` still takes: at its observed speed once it has moved, else at the measured or default one. */
  private left(step: Step): number {
    if (step.ended !== undefined) return 0;
    const remaining = Math.max(0, step.work - step.done);
    const prior = remaining / this.speeds.get(step.phase, this.variant(step.phase));
    if (step.started === undefined) return prior;
    const elapsed = (this.now() - step.started) / 1000;
    const moved = step.done - step.base;
    if (moved > 0 && elapsed > 0) return Math.max(remaining > 0 ? MIN_LEFT : 0, (remaining * elapsed) / moved);
    return Math.max(MIN_LEFT, prior - elapsed); // not moved yet: its remaining work is all of it
  }
}

/**
 * What the scheduler observes of a node's speed over a recent window: the time from dispatch to a
 * completion's first text (TTFT), and the tokens per second of its generation (tokens counted as
 * the fewer of what the node reports and the bytes of text it sent: a token is at least a byte).
 * Routing weighs these (`slowness`, at most MAX_SLOWNESS), so a node's claim of many slots draws no
 * more work than it answers at the speed of the others. A TTFT counts only of a completion that
 * finished: a node sending a byte at once and never ending looks no faster for it.
 */

/** How far back observations count. */
export const SPEED_WINDOW_MS = 60_000;
/** Observations kept per node at most (the newest). */
const MAX_SAMPLES = 64;

interface Sample {
  at: number;
  value: number;
}

/** The mean of the samples within the window (undefined without any); older ones are forgotten. */
function windowMean(samples: Sample[], now: number): number | undefined {
  while (samples.length > 0 && samples[0]!.at < now - SPEED_WINDOW_MS) samples.shift();
  if (samples.length === 0) return undefined;
  return samples.reduce((n, s) => n + s.value, 0) / samples.length;
}

function add(samples: Sample[], value: number, now: number): void {
  samples.push({ at: now, value });
  if (samples.length > MAX_SAMPLES) samples.shift();
}

export class NodeSpeed {
  private readonly ttfts: Sample[] = [];
  private readonly rates: Sample[] = [];

  /** A completion's first text came `ms` after its dispatch. */
  firstText(ms: number, now = Date.now()): void {
    add(this.ttfts, Math.max(0, ms), now);
  }

  /** A completion generated at `tokensPerSecond`. */
  generated(tokensPerSecond: number, now = Date.now()): void {
    if (Number.isFinite(tokensPerSecond) && tokensPerSecond > 0) add(this.rates, tokensPerSecond, now);
  }

  /** Mean time to first token over the window, in ms (undefined: none observed). */
  ttftMs(now = Date.now()): number | undefined {
    return windowMean(this.ttfts, now);
  }

  /** Mean tokens per second over the window (undefined: none observed). */
  tokensPerSecond(now = Date.now()): number | undefined {
    return windowMean(this.rates, now);
  }
}

/** The best TTFT and tokens/s among `nodes` (Infinity and 0 when none was observed). */
export function fastest(nodes: Iterable<NodeSpeed>, now = Date.now()): { ttftMs: number; tokensPerSecond: number } {
  let ttftMs = Infinity;
  let tokensPerSecond = 0;
  for (const n of nodes) {
    ttftMs = Math.min(ttftMs, n.ttftMs(now) ?? Infinity);
    tokensPerSecond = Math.max(tokensPerSecond, n.tokensPerSecond(now) ?? 0);
  }
  return { ttftMs, tokensPerSecond };
}

/**
 * The most a node's slowness counts: a node that seems faster than it is (a lie the scheduler cannot
 * always see through) makes an honest one at most this much slower, so it cannot take all the work.
 */
export const MAX_SLOWNESS = 4;

/**
 * How much slower than the fastest candidates (`best`, from `fastest`) a node is, from 1 to
 * MAX_SLOWNESS: the larger of its TTFT over the best TTFT and the best tokens per second over its
 * own. A node without observations counts as fast as the best (a new node gets work, and so
 * observations). TTFTs are recorded only of completions that finished (fleet.ts `settle`).
 */
export function slowness(node: NodeSpeed, best: { ttftMs: number; tokensPerSecond: number }, now = Date.now()): number {
  const t = node.ttftMs(now);
  const r = node.tokensPerSecond(now);
  // 1 ms floors: a TTFT of 0 (a node answering before it could have read the prompt) divides nothing
  const byTtft = t !== undefined && best.ttftMs < Infinity ? Math.max(t, 1) / Math.max(best.ttftMs, 1) : 1;
  const byRate = r !== undefined && best.tokensPerSecond > 0 ? best.tokensPerSecond / r : 1;
  return Math.min(MAX_SLOWNESS, Math.max(1, byTtft, byRate));
}

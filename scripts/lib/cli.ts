/** Small helpers the benchmark and evaluation scripts share. */

/** The value after `flag` in `argv`, if any. */
export function argValue(argv: readonly string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}

/** The q-quantile of `xs` (0 ≤ q ≤ 1), interpolating linearly between the two nearest values; NaN when empty. */
export function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  const at = (s.length - 1) * q,
    lo = Math.floor(at),
    hi = Math.ceil(at);
  return s[lo]! + (s[hi]! - s[lo]!) * (at - lo);
}

export const median = (xs: readonly number[]): number => quantile(xs, 0.5);

/** Per-round ratios as a benchmark prints them: their median and their range. */
export const spread = (xs: readonly number[]): string => `median ${median(xs).toFixed(3)}, rounds ${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}`;

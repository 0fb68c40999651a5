/**
 * Diarization error rate: (missed speech + false alarm + speaker confusion) / reference speech,
 * on a 10 ms grid, no collar, overlaps counted per speaker, with the best one-to-one mapping of
 * hypothesis speakers onto reference speakers (exhaustive: speaker counts here are small).
 */
export interface Turn {
  speaker: string;
  start: number;
  end: number;
}

/** Turns of an RTTM file (`SPEAKER <file> <chan> <start> <dur> <NA> <NA> <speaker> …`). */
export function parseRttm(text: string): Turn[] {
  return text
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[0] === "SPEAKER" && f.length >= 8)
    .map((f) => ({ speaker: f[7]!, start: Number(f[3]), end: Number(f[3]) + Number(f[4]) }));
}

const STEP = 0.01;

function frames(turns: readonly Turn[], speakers: string[], n: number): Uint8Array[] {
  return speakers.map((s) => {
    const active = new Uint8Array(n);
    for (const t of turns.filter((x) => x.speaker === s)) {
      for (let i = Math.max(0, Math.round(t.start / STEP)); i < Math.min(n, Math.round(t.end / STEP)); i++) active[i] = 1;
    }
    return active;
  });
}

function permutations(n: number, k: number): number[][] {
  // All injective maps of k hypothesis speakers into n reference slots (-1 = unmapped).
  const out: number[][] = [];
  const walk = (prefix: number[]) => {
    if (prefix.length === k) return void out.push([...prefix]);
    for (let r = -1; r < n; r++) if (r === -1 || !prefix.includes(r)) walk([...prefix, r]);
  };
  walk([]);
  return out;
}

export interface DerResult {
  der: number;
  missed: number;
  falseAlarm: number;
  confusion: number;
  referenceSpeech: number;
  mapping: Record<string, string | null>;
}

export function diarizationErrorRate(reference: readonly Turn[], hypothesis: readonly Turn[]): DerResult {
  const end = Math.max(0, ...reference.map((t) => t.end), ...hypothesis.map((t) => t.end));
  const n = Math.ceil(end / STEP) + 1;
  const refSpeakers = [...new Set(reference.map((t) => t.speaker))];
  const hypSpeakers = [...new Set(hypothesis.map((t) => t.speaker))];
  const ref = frames(reference, refSpeakers, n);
  const hyp = frames(hypothesis, hypSpeakers, n);
  let best: DerResult | undefined;
  for (const map of permutations(refSpeakers.length, hypSpeakers.length)) {
    let missed = 0,
      falseAlarm = 0,
      confusion = 0,
      speech = 0;
    for (let i = 0; i < n; i++) {
      const nRef = ref.reduce((a, r) => a + r[i]!, 0);
      const nHyp = hyp.reduce((a, h) => a + h[i]!, 0);
      let correct = 0;
      hyp.forEach((h, j) => {
        if (h[i] && map[j]! >= 0 && ref[map[j]!]![i]) correct++;
      });
      speech += nRef;
      missed += Math.max(0, nRef - nHyp);
      falseAlarm += Math.max(0, nHyp - nRef);
      confusion += Math.min(nRef, nHyp) - correct;
    }
    const der = speech ? (missed + falseAlarm + confusion) / speech : 0;
    if (!best || der < best.der) {
      best = {
        der,
        missed: missed * STEP,
        falseAlarm: falseAlarm * STEP,
        confusion: confusion * STEP,
        referenceSpeech: speech * STEP,
        mapping: Object.fromEntries(hypSpeakers.map((h, j) => [h, map[j]! >= 0 ? refSpeakers[map[j]!]! : null])),
      };
    }
  }
  return best ?? { der: 0, missed: 0, falseAlarm: 0, confusion: 0, referenceSpeech: 0, mapping: {} };
}

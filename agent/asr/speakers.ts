/**
 * Putting speakers on a transcript: every word gets the speaker whose turn overlaps it most
 * (the nearest turn when none does); segments split where the speaker changes; labels are
 * `SPEAKER_00`, `SPEAKER_01`, … in order of first appearance; `transcript_with_speakers` lists
 * the turns with their text.
 */
import type { DiarizationSegment } from "./sherpa.js";
import type { Segment, SpeakerTurn, Word } from "../../speech/transcript.js";

export const speakerLabel = (n: number) => `SPEAKER_${String(n).padStart(2, "0")}`;

function speakerAt(turns: readonly DiarizationSegment[], start: number, end: number): number | undefined {
  let best: number | undefined;
  let bestOverlap = 0;
  let nearest: number | undefined;
  let nearestGap = Infinity;
  for (const t of turns) {
    const overlap = Math.min(end, t.end) - Math.max(start, t.start);
    if (overlap > bestOverlap) {
      bestOverlap = overlap;
      best = t.speaker;
    }
    const gap = overlap > 0 ? 0 : Math.max(t.start - end, start - t.end);
    if (gap < nearestGap) {
      nearestGap = gap;
      nearest = t.speaker;
    }
  }
  return best ?? nearest;
}

export function attributeSpeakers(segments: readonly Segment[], turns: readonly DiarizationSegment[]): { segments: Segment[]; turns: SpeakerTurn[] } {
  const labels = new Map<number, string>();
  const label = (speaker: number | undefined) => {
    if (speaker === undefined) return speakerLabel(0);
    if (!labels.has(speaker)) labels.set(speaker, speakerLabel(labels.size));
    return labels.get(speaker)!;
  };
  const out: Omit<Segment, "id">[] = [];
  for (const seg of segments) {
    if (!seg.words.length) {
      out.push({ ...seg, speaker: label(speakerAt(turns, seg.start, seg.end)) });
      continue;
    }
    let current: Omit<Segment, "id"> | undefined;
    for (const w of seg.words) {
      const speaker = label(speakerAt(turns, w.start, Math.max(w.end, w.start + 0.01)));
      const word: Word = { ...w, speaker };
      if (current && current.speaker === speaker) {
        current.words.push(word);
        current.end = Math.max(current.end, w.end);
      } else {
        current = { start: w.start, end: w.end, text: "", words: [word], speaker };
        out.push(current);
      }
    }
  }
  const withText = out.map((s, id) => ({ ...s, id, text: s.words.length ? s.words.map((w) => w.word).join(" ") : s.text }));
  const speakerTurns: SpeakerTurn[] = [];
  for (const s of withText) {
    const last = speakerTurns[speakerTurns.length - 1];
    if (last && last.speaker === s.speaker) {
      last.end = Math.max(last.end, s.end);
      last.text = `${last.text} ${s.text}`;
    } else {
      // Turns never overlap: one starts where the previous ended at the earliest.
      speakerTurns.push({ speaker: s.speaker!, start: Math.max(s.start, last?.end ?? 0), end: Math.max(s.end, last?.end ?? 0), text: s.text });
    }
  }
  return { segments: withText, turns: speakerTurns };
}

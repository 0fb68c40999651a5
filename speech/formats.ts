/**
 * The four output formats of the transcription tool: TXT, SRT, VTT and JSON. Subtitle cues are
 * built from timed words so they stay short (at most two lines of 42 characters and 7 seconds),
 * come in order and never overlap; a change of speaker starts a new cue.
 */
import type { Segment, Transcript } from "./transcript.js";

export const FORMATS = ["txt", "srt", "vtt", "json"] as const;
export type OutputFormat = (typeof FORMATS)[number];

export const CONTENT_TYPES: Record<OutputFormat, string> = {
  txt: "text/plain; charset=utf-8",
  srt: "application/x-subrip; charset=utf-8",
  vtt: "text/vtt; charset=utf-8",
  json: "application/json; charset=utf-8",
};

export interface Cue {
  start: number;
  end: number;
  /** One or two lines. */
  lines: string[];
  speaker?: string;
}

export const CUE_LINE_CHARS = 42;
export const CUE_MAX_LINES = 2;
export const CUE_MAX_SECONDS = 7;
const MIN_CUE_SECONDS = 0.04;

export function render(transcript: Transcript, format: OutputFormat): string {
  switch (format) {
    case "txt":
      return renderTxt(transcript);
    case "srt":
      return renderSrt(transcript);
    case "vtt":
      return renderVtt(transcript);
    case "json":
      return `${JSON.stringify(transcript, null, 2)}\n`;
  }
}

function renderTxt(t: Transcript): string {
  const lines = t.segments.map((s) => (s.speaker ? `[${s.speaker}] ${s.text}` : s.text));
  return lines.length ? `${lines.join("\n")}\n` : "";
}

function renderSrt(t: Transcript): string {
  return buildCues(t.segments)
    .map(
      (c, i) => `${i + 1}\n${timestamp(c.start, ",")} --> ${timestamp(c.end, ",")}\n${(c.speaker ? [`${c.speaker}: ${c.lines[0]}`, ...c.lines.slice(1)] : c.lines).join("\n")}\n`,
    )
    .join("\n");
}

function renderVtt(t: Transcript): string {
  const cues = buildCues(t.segments).map(
    (c) => `${timestamp(c.start, ".")} --> ${timestamp(c.end, ".")}\n${(c.speaker ? [`<v ${c.speaker}>${c.lines[0]}`, ...c.lines.slice(1)] : c.lines).join("\n")}\n`,
  );
  return ["WEBVTT\n", ...cues].join("\n");
}

/** `HH:MM:SS,mmm` (SRT) or `HH:MM:SS.mmm` (VTT); hours grow past 99 if they must. */
export function timestamp(seconds: number, separator: "," | "."): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

/** Wraps text into lines of at most `CUE_LINE_CHARS` (a longer single word gets its own line). */
export function wrap(text: string, width = CUE_LINE_CHARS): string[] {
  const lines: string[] = [];
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const last = lines[lines.length - 1];
    if (last !== undefined && last.length + 1 + word.length <= width) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines;
}

interface TimedWord {
  word: string;
  start: number;
  end: number;
}

/** The words of a segment, or its text spread evenly over its time when whisper gave no words. */
function timedWords(s: Segment): TimedWord[] {
  if (s.words.length) return s.words;
  const parts = s.text.split(/\s+/).filter(Boolean);
  const step = (s.end - s.start) / Math.max(1, parts.length);
  return parts.map((word, i) => ({ word, start: s.start + i * step, end: s.start + (i + 1) * step }));
}

export function buildCues(segments: readonly Segment[]): Cue[] {
  const maxChars = CUE_LINE_CHARS * CUE_MAX_LINES;
  const drafts: { start: number; end: number; text: string; speaker?: string }[] = [];
  for (const seg of segments) {
    let current: (typeof drafts)[number] | undefined;
    for (const w of timedWords(seg)) {
      const text = current ? `${current.text} ${w.word}` : w.word;
      const fits = current && text.length <= maxChars && wrap(text).length <= CUE_MAX_LINES && w.end - current.start <= CUE_MAX_SECONDS;
      if (current && fits) {
        current.text = text;
        current.end = w.end;
      } else {
        current = { start: w.start, end: w.end, text: w.word, ...(seg.speaker ? { speaker: seg.speaker } : {}) };
        drafts.push(current);
      }
    }
  }
  drafts.sort((a, b) => a.start - b.start);
  const cues: Cue[] = [];
  let previousEnd = 0;
  for (const d of drafts) {
    const start = Math.max(d.start, previousEnd);
    const end = Math.min(Math.max(d.end, start + MIN_CUE_SECONDS), start + CUE_MAX_SECONDS);
    const lines = wrap(d.text);
    cues.push({ start, end, lines: lines.length > CUE_MAX_LINES ? [lines[0]!, lines.slice(1).join(" ")] : lines, ...(d.speaker ? { speaker: d.speaker } : {}) });
    previousEnd = end;
  }
  return cues;
}

/**
 * A transcription's finished steps, kept in its work folder so that a run stopped anywhere (a
 * drain, a crash, a power cut) resumes from the last one instead of from the start:
 *
 * - `decoded.json`: the decoded PCM (`audio.f32`) is whole, with its sample count;
 * - `speech.json`: the voice-activity spans;
 * - `diarization.json`: the speaker turns;
 * - `chunks.jsonl`: one line per whisper chunk decoded, appended as each finishes;
 * - `transcript.json`: the transcript before translation;
 * - `translated.jsonl`: one line per segment translated.
 *
 * Each JSON file is written to a temporary name and renamed into place, so it is whole or absent.
 * The line files are appended one record per write, each on a line of its own; a line cut short by a
 * crash is ignored. A file
 * that does not parse is treated as absent: the step runs again. The folder is the agent's own
 * (never a tenant's path), so what it holds is trusted as far as its shape.
 */
import { appendFile, readFile, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { SpeechSpan } from "./vad/index.js";
import type { DiarizationSegment } from "./diarize/index.js";
import type { Segment, Transcript } from "../../speech/transcript.js";

/** A whisper chunk's outcome as kept: its segments on the original timeline and the language it heard. */
export interface ChunkRecord {
  index: number;
  /** Where the chunk begins on the original timeline and how long it is, in samples: a record is used only for the same chunk. */
  start: number;
  samples: number;
  /** Seconds of speech in the chunk. */
  seconds: number;
  segments: Omit<Segment, "id">[];
  lang?: string;
  langProb?: number;
}

/** One translated segment. */
export interface TranslatedRecord {
  id: number;
  text: string;
}

export class Checkpoint {
  /** Called after each step is recorded (the job store notes that the job advanced). */
  onSaved: () => void = () => undefined;

  constructor(readonly dir: string) {}

  /** The decoded audio, in the same folder. */
  get pcmPath(): string {
    return join(this.dir, "audio.f32");
  }

  /** The sample count of the decoded audio when it is whole on disk. */
  async decoded(): Promise<number | undefined> {
    const kept = await this.read<{ samples: number }>("decoded.json");
    if (!kept || !Number.isInteger(kept.samples) || kept.samples <= 0) return undefined;
    const size = await stat(this.pcmPath).then(
      (s) => s.size,
      () => -1,
    );
    return size === kept.samples * 4 ? kept.samples : undefined;
  }

  saveDecoded(samples: number): Promise<void> {
    return this.write("decoded.json", { samples });
  }

  async speech(): Promise<SpeechSpan[] | undefined> {
    const spans = await this.read<SpeechSpan[]>("speech.json");
    return Array.isArray(spans) ? spans : undefined;
  }

  saveSpeech(spans: readonly SpeechSpan[]): Promise<void> {
    return this.write("speech.json", spans);
  }

  async diarization(): Promise<DiarizationSegment[] | undefined> {
    const turns = await this.read<DiarizationSegment[]>("diarization.json");
    return Array.isArray(turns) ? turns : undefined;
  }

  saveDiarization(turns: readonly DiarizationSegment[]): Promise<void> {
    return this.write("diarization.json", turns);
  }

  /** The chunks finished by earlier runs, by index (the caller checks each against its own plan). */
  async chunks(): Promise<Map<number, ChunkRecord>> {
    const done = new Map<number, ChunkRecord>();
    for (const record of await this.lines<ChunkRecord>("chunks.jsonl")) {
      if (Number.isInteger(record.index) && record.index >= 0 && Array.isArray(record.segments) && typeof record.seconds === "number") done.set(record.index, record);
    }
    return done;
  }

  saveChunk(record: ChunkRecord): Promise<void> {
    return this.append("chunks.jsonl", record);
  }

  async transcript(): Promise<Transcript | undefined> {
    const t = await this.read<Transcript>("transcript.json");
    return t && typeof t.text === "string" && Array.isArray(t.segments) ? t : undefined;
  }

  saveTranscript(transcript: Transcript): Promise<void> {
    return this.write("transcript.json", transcript);
  }

  /** The segments translated by earlier runs: segment id → its translation. */
  async translated(): Promise<Map<number, string>> {
    const done = new Map<number, string>();
    for (const r of await this.lines<TranslatedRecord>("translated.jsonl")) if (Number.isInteger(r.id) && typeof r.text === "string") done.set(r.id, r.text);
    return done;
  }

  saveTranslated(record: TranslatedRecord): Promise<void> {
    return this.append("translated.jsonl", record);
  }

  private async read<T>(name: string): Promise<T | undefined> {
    try {
      return JSON.parse(await readFile(join(this.dir, name), "utf8")) as T;
    } catch {
      return undefined; // absent, or not whole: the step runs again
    }
  }

  private async write(name: string, value: unknown): Promise<void> {
    const path = join(this.dir, name);
    await writeFile(`${path}.partial`, JSON.stringify(value));
    await rename(`${path}.partial`, path);
    this.onSaved();
  }

  private async append(name: string, value: unknown): Promise<void> {
    // One write per record, starting a line of its own: a record cut short by a crash never runs
    // into the next run's first one, and `lines` skips it.
    await appendFile(join(this.dir, name), `\n${JSON.stringify(value)}`);
    this.onSaved();
  }

  private async lines<T>(name: string): Promise<T[]> {
    const text = await readFile(join(this.dir, name), "utf8").catch(() => "");
    const out: T[] = [];
    for (const line of text.split("\n")) {
      if (!line) continue;
      try {
        out.push(JSON.parse(line) as T);
      } catch {
        // a line cut short by a crash
      }
    }
    return out;
  }
}

/**
 * One transcription, start to end: probe → decode to 16 kHz PCM on disk → voice activity →
 * chunks of speech (≤ 30 s, silence removed) → whisper on parallel states → words → transcript.
 * Progress is reported as a fraction that only rises, with an ETA from the measured speed.
 */
import { mkdir, rm } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Logger } from "../../core/log.js";
import { Semaphore } from "../../core/semaphore.js";
import type { WhisperModelName } from "../../models/whisper.js";
import { chunkSeconds, planChunks, type Chunk } from "./chunks.js";
import { diarize, type DiarizationModels, type DiarizationSegment } from "./diarize/index.js";
import { AudioError, EngineError, JobAbortedError } from "./errors.js";
import { attributeSpeakers } from "./speakers.js";
import { decodeToPcm, probeAudio, SAMPLE_RATE } from "./ffmpeg.js";
import { PcmFile } from "./pcm.js";
import type { Segment, SpeakerTurn, Transcript } from "../../speech/transcript.js";
import { detectSpeech, type VadOptions } from "./vad/index.js";
import type { WhisperPool, WhisperSegment } from "./whisper.js";
import type { DecodingOptions } from "./engine/whisper-protocol.js";
import { segmentsFromChunk } from "./words.js";

export interface TranscribeRequest {
  /** Names this run's whisper engine process (`WhisperPool.engines()`); the job id. Default: the work folder's name. */
  label?: string;
  /** The uploaded file. */
  input: string;
  /** The name the user knows the file by, for error messages. */
  displayName: string;
  /** A scratch folder for this job (removed afterwards). */
  workDir: string;
  model: WhisperModelName;
  /** A whisper language code; detected when absent. */
  language?: string;
  /** Whisper's translate task (into English). */
  translate: boolean;
  /** Label speakers (needs the transcriber's diarization models). */
  diarization?: { minSpeakers?: number; maxSpeakers?: number };
  /** Translate the transcript into this language (not English) with the translator. */
  translateTo?: string;
  /** How whisper decodes (prompt, temperatures, thresholds); absent fields: the engine's defaults. */
  decoding?: DecodingOptions;
  /** Voice activity detection beyond the agent's settings: the speech threshold and the silence that ends a span. */
  vad?: Pick<VadOptions, "threshold" | "minSilenceSeconds">;
}

/** Translates one piece of text; the agent backs this with its chat model. */
export type Translator = (text: string, from: string, to: string, signal?: AbortSignal) => Promise<string>;

export interface Progress {
  /** 0–1, never decreasing. */
  progress: number;
  /** Whole seconds left, from the measured speed. */
  etaSeconds: number;
}

export interface TranscriberOptions {
  whisper: WhisperPool;
  vad: VadOptions;
  /** Longest accepted audio, in seconds (the spec's 4 hours). */
  maxAudioSeconds: number;
  /** Speaker diarization models; absent means diarization is unavailable. */
  diarization?: DiarizationModels;
  /** Translation into languages other than English; absent means unavailable. */
  translator?: Translator;
  /** ffmpeg is killed after this long without progress (default: `DEFAULT_STALL_MS`, 120 s). */
  ffmpegStallMs?: number;
  logger: Logger;
}

/** Shares of the progress bar taken by each stage (whisper takes the rest). */
const DECODE_SHARE = 0.05;
const VAD_SHARE = 0.05;
/** Wall seconds per second of speech assumed before any has been measured. */
const INITIAL_RTF = 0.5;

export class Transcriber {
  /** Measured wall seconds of whisper per second of speech, per model (moving average). */
  private readonly rtf = new Map<WhisperModelName, number>();

  constructor(private readonly options: TranscriberOptions) {}

  /**
   * Transcribes `request.input`. `onProgress` hears the progress as it moves; `onSegments` hears
   * whisper's segments as they become final in time order (a chunk's once every chunk before it is
   * decoded: chunks decode in parallel), numbered in that order. They are whisper's: speaker labels
   * (which may split a segment) and translation come after, so with those the result's differ.
   */
  async run(request: TranscribeRequest, onProgress: (p: Progress) => void, signal?: AbortSignal, onSegments?: (segments: Segment[]) => void): Promise<Transcript> {
    const { whisper, logger } = this.options;
    const started = Date.now();
    let floor = 0;
    const report = (progress: number, etaSeconds: number) => {
      floor = Math.max(floor, Math.min(1, progress));
      onProgress({ progress: floor, etaSeconds: Math.max(0, Math.ceil(etaSeconds)) });
    };
    const rtf = this.rtf.get(request.model) ?? INITIAL_RTF;

    await mkdir(request.workDir, { recursive: true });
    const pcmPath = join(request.workDir, "audio.f32");
    try {
      const stall = this.options.ffmpegStallMs !== undefined ? { stallMs: this.options.ffmpegStallMs } : {};
      const probe = await probeAudio(request.input, request.displayName, { ...stall, ...(signal ? { signal } : {}) });
      if (probe.durationSeconds !== undefined && probe.durationSeconds > this.options.maxAudioSeconds) {
        throw new AudioError(`${request.displayName} lasts ${formatDuration(probe.durationSeconds)}, over the ${this.options.maxAudioSeconds / 3600}-hour limit`);
      }
      report(0.01, (probe.durationSeconds ?? 60) * rtf);
      const samples = await decodeToPcm(request.input, pcmPath, {
        maxSeconds: this.options.maxAudioSeconds,
        displayName: request.displayName,
        ...stall,
        ...(signal ? { signal } : {}),
      });
      const duration = samples / SAMPLE_RATE;
      report(DECODE_SHARE, duration * rtf);
      if (signal?.aborted) throw new JobAbortedError();

      const speakers = request.diarization ? this.diarize(pcmPath, request.diarization, signal) : undefined;
      speakers?.catch(() => undefined); // awaited below; never an unhandled rejection meanwhile
      const spans = await detectSpeech(pcmPath, { ...this.options.vad, ...request.vad }, (f) => report(DECODE_SHARE + VAD_SHARE * f, duration * rtf), signal);
      const chunks = planChunks(spans, samples);
      const speech = chunkSeconds(chunks);
      report(DECODE_SHARE + VAD_SHARE, speech * rtf);
      logger.debug({ input: request.displayName, duration, spans: spans.length, chunks: chunks.length, speech }, "voice activity");

      const segments = await this.decodeChunks(request, pcmPath, chunks, speech, rtf, report, signal, onSegments);
      const detected = request.language ? undefined : majority(segments.languages);
      const language = request.language ?? detected ?? "unknown";
      const probability = detected !== undefined ? segments.probabilities.get(detected) : undefined;
      let list = segments.list;
      let turns: SpeakerTurn[] | undefined;
      if (speakers) {
        ({ segments: list, turns } = attributeSpeakers(list, await speakers));
      }
      const transcript: Transcript = {
        text: list.map((s) => s.text).join(" "),
        language,
        ...(probability && probability.seconds > 0 ? { language_probability: Math.round((probability.sum / probability.seconds) * 1000) / 1000 } : {}),
        duration: Math.round(duration * 1000) / 1000,
        task: request.translate ? "translate" : "transcribe",
        model: request.model,
        segments: list,
        ...(turns ? { transcript_with_speakers: turns } : {}),
      };
      if (request.translateTo) await this.translate(transcript, request.translateTo, signal);
      report(1, 0);
      logger.info(
        { input: request.displayName, model: request.model, duration, speech, chunks: chunks.length, ms: Date.now() - started, parallel: whisper.parallel },
        "transcribed",
      );
      return transcript;
    } catch (err) {
      // Whatever a stopped run threw (ffmpeg's AbortError, the chat engine's), it was stopped, not failed.
      if (signal?.aborted) throw new JobAbortedError();
      throw err;
    } finally {
      await rm(request.workDir, { recursive: true, force: true });
    }
  }

  private async diarize(pcmPath: string, counts: NonNullable<TranscribeRequest["diarization"]>, signal?: AbortSignal): Promise<DiarizationSegment[]> {
    if (!this.options.diarization) throw new EngineError("speaker diarization needs --segmentation-model and --embedding-model");
    return diarize(pcmPath, this.options.diarization, counts, signal);
  }

  /**
   * Translates segment by segment (and speaker turn by turn), keeping timings: each keeps its
   * original text in `original_text`; the transcript records `translated_to`.
   */
  private async translate(transcript: Transcript, to: string, signal?: AbortSignal): Promise<void> {
    const translator = this.options.translator;
    if (!translator) throw new EngineError(`translation into "${to}" needs a chat model on this node (--serve)`);
    const from = transcript.language;
    for (const seg of transcript.segments) {
      if (signal?.aborted) throw new JobAbortedError();
      seg.original_text = seg.text;
      seg.text = (await translator(seg.text, from, to, signal)).trim();
    }
    for (const turn of transcript.transcript_with_speakers ?? []) {
      turn.original_text = turn.text;
      turn.text = transcript.segments
        .filter((s) => s.speaker === turn.speaker && s.end > turn.start && s.start < turn.end)
        .map((s) => s.text)
        .join(" ");
    }
    transcript.original_text = transcript.text;
    transcript.text = transcript.segments.map((s) => s.text).join(" ");
    transcript.translated_to = to;
  }

  private async decodeChunks(
    request: TranscribeRequest,
    pcmPath: string,
    chunks: Chunk[],
    speech: number,
    initialRtf: number,
    report: (progress: number, eta: number) => void,
    signal?: AbortSignal,
    onSegments?: (segments: Segment[]) => void,
  ): Promise<{ list: Segment[]; languages: Map<string, number>; probabilities: Map<string, { sum: number; seconds: number }> }> {
    const { whisper } = this.options;
    // This run's own whisper engine process: a native crash there fails this job alone.
    const session = whisper.session(request.label ?? basename(request.workDir));
    const pcm = await PcmFile.open(pcmPath).catch((err: unknown) => {
      void session.close();
      throw err;
    });
    const perChunk: Omit<Segment, "id">[][] = new Array<Omit<Segment, "id">[]>(chunks.length);
    const languages = new Map<string, number>();
    // per detected language: its probabilities weighted by the seconds of the chunks that detected it
    const probabilities = new Map<string, { sum: number; seconds: number }>();
    const partial = new Map<number, number>(); // chunk index → seconds decoded so far
    let done = 0;
    // the segments given to onSegments so far: those of chunks 0 … nextChunk − 1
    let nextChunk = 0;
    let released = 0;
    const releaseInOrder = () => {
      while (perChunk[nextChunk] !== undefined) {
        const finished = perChunk[nextChunk++]!.map((s) => ({ id: released++, ...s }));
        if (finished.length > 0) onSegments?.(finished);
      }
    };
    const whisperStart = Date.now();
    const update = () => {
      const decoded = done + [...partial.values()].reduce((a, b) => a + b, 0);
      const elapsed = (Date.now() - whisperStart) / 1000;
      const measured = decoded > 1 ? elapsed / decoded : initialRtf;
      const fraction = speech > 0 ? decoded / speech : 1;
      report(DECODE_SHARE + VAD_SHARE + (1 - DECODE_SHARE - VAD_SHARE) * fraction, (speech - decoded) * measured);
    };
    // Bounds the chunks held in memory by this job to what whisper can decode at once.
    const inFlight = new Semaphore(whisper.parallel);
    try {
      await Promise.all(
        chunks.map(async (chunk) => {
          const release = await inFlight.acquire();
          try {
            if (signal?.aborted) throw new JobAbortedError();
            const audio = await readChunk(pcm, chunk);
            const seconds = chunk.samples / SAMPLE_RATE;
            const decoded: WhisperSegment[] = await session.decode(
              request.model,
              audio,
              {
                translate: request.translate,
                ...(request.language ? { language: request.language } : {}),
                ...(request.decoding ? { decoding: request.decoding } : {}),
              },
              (seg) => {
                partial.set(chunk.index, Math.min(seconds, seg.to / 1000));
                update();
              },
              signal ? { signal } : {},
            );
            partial.delete(chunk.index);
            done += seconds;
            const first = decoded.find((s) => s.lang);
            const lang = first?.lang;
            if (lang) languages.set(lang, (languages.get(lang) ?? 0) + seconds);
            if (lang && first.langProb !== undefined) {
              const p = probabilities.get(lang) ?? { sum: 0, seconds: 0 };
              probabilities.set(lang, { sum: p.sum + first.langProb * seconds, seconds: p.seconds + seconds });
            }
            perChunk[chunk.index] = segmentsFromChunk(chunk, decoded);
            releaseInOrder();
            update();
          } finally {
            release();
          }
        }),
      );
    } finally {
      void session.close(); // once its last decode ends, the engine serves the next run
      await pcm.close();
    }
    if (speech > 0) {
      const measured = (Date.now() - whisperStart) / 1000 / speech;
      const previous = this.rtf.get(request.model);
      this.rtf.set(request.model, previous === undefined ? measured : 0.7 * previous + 0.3 * measured);
    }
    const list = perChunk
      .flat()
      .sort((a, b) => a.start - b.start)
      .map((s, id) => ({ id, ...s }));
    return { list, languages, probabilities };
  }
}

async function readChunk(pcm: PcmFile, chunk: Chunk): Promise<Float32Array> {
  const out = new Float32Array(chunk.samples);
  let at = 0;
  for (const p of chunk.pieces) {
    out.set(await pcm.read(p.start, p.end), at);
    at += p.end - p.start;
  }
  return out;
}

function majority(weights: Map<string, number>): string | undefined {
  return [...weights.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
}

function formatDuration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.round((seconds % 3600) / 60);
  return h ? `${h} h ${m} min` : `${m} min`;
}

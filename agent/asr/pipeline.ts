/**
 * One transcription, start to end: probe → decode to 16 kHz PCM on disk → voice activity →
 * chunks of speech (≤ 30 s, silence removed) → whisper on parallel states → words → speakers →
 * translation → transcript. Diarization runs beside voice detection and whisper.
 *
 * Each finished step is kept in the run's work folder (`Checkpoint`): a resumable run that is
 * stopped (a drain) or killed resumes from the last one, its decoded audio and finished chunks
 * not computed again. Progress is reported by phase, with an ETA from each phase's observed speed
 * (`RunProgress`), refreshed every second whether or not the work moved.
 */
import { mkdir, rm } from "node:fs/promises";
import { basename } from "node:path";
import type { Logger } from "../../core/log.js";
import { Semaphore } from "../../core/semaphore.js";
import type { WhisperModelName } from "../../models/whisper.js";
import { Checkpoint, type ChunkRecord } from "./checkpoint.js";
import { chunkSeconds, planChunks, type Chunk } from "./chunks.js";
import { diarize, type DiarizationModels, type DiarizationSegment } from "./diarize/index.js";
import { AudioError, EngineError, JobAbortedError } from "./errors.js";
import { PhaseSpeeds, RunProgress, type RunPhase } from "./eta.js";
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
  /**
   * A scratch folder for this job, holding its checkpoints. Removed when the run ends, unless it
   * is `resumable`: then a later run on the same folder resumes from it, and the caller removes it
   * once the job has ended.
   */
  workDir: string;
  /** Keep the work folder after the run (the caller removes it once the job has ended). Default false. */
  resumable?: boolean;
  /** Called when a step is kept in the work folder (the job advanced). */
  onCheckpoint?: () => void;
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
  /** What the run is doing now. */
  phase: RunPhase;
  /** 0–1, never decreasing. */
  progress: number;
  /** Whole seconds left, from the measured speeds. */
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
  /** Why this node's ffmpeg cannot run the decode (`checkFfmpeg` at start): a run that must decode fails as an engine fault, never a file's. */
  ffmpegFault?: string;
  logger: Logger;
}

/** How often progress is told while a phase runs, moved or not. */
const REPORT_EVERY_MS = 1000;

/** Whisper's outcome over all chunks. */
interface Decoded {
  list: Segment[];
  languages: Map<string, number>;
  probabilities: Map<string, { sum: number; seconds: number }>;
}

/** One run's context, passed between its steps. */
interface Run {
  request: TranscribeRequest;
  checkpoint: Checkpoint;
  clock: RunProgress;
  /** Tells the progress now (rising only). */
  report: () => void;
  signal: AbortSignal | undefined;
  /** Hears whisper's segments in time order (`Transcriber.run`). */
  onSegments: ((segments: Segment[]) => void) | undefined;
  /** Steps taken from the checkpoint, for the log. */
  resumed: string[];
}

export class Transcriber {
  /** Each phase's measured speed on this node. */
  private readonly speeds = new PhaseSpeeds();

  constructor(private readonly options: TranscriberOptions) {}

  /**
   * Transcribes `request.input`. `onProgress` hears the progress as it moves (and at least every
   * second); `onSegments` hears whisper's segments as they become final in time order (a chunk's
   * once every chunk before it is decoded: chunks decode in parallel), numbered in that order. They
   * are whisper's: speaker labels (which may split a segment) and translation come after, so with
   * those the result's differ. A resumed run tells its kept chunks' segments again first.
   */
  async run(request: TranscribeRequest, onProgress: (p: Progress) => void, signal?: AbortSignal, onSegments?: (segments: Segment[]) => void): Promise<Transcript> {
    const { logger } = this.options;
    const started = Date.now();
    await mkdir(request.workDir, { recursive: true });
    const checkpoint = new Checkpoint(request.workDir);
    if (request.onCheckpoint) checkpoint.onSaved = request.onCheckpoint;
    const clock = new RunProgress(this.speeds, {
      audioSeconds: 60, // until the probe says
      diarization: request.diarization !== undefined,
      translation: request.translateTo !== undefined,
      model: request.model,
    });
    let floor = 0;
    let ended = false;
    // Stops the run's other work (chunks in flight, diarization beside them) when one part fails.
    const halt = new AbortController();
    const stop = signal ? AbortSignal.any([signal, halt.signal]) : halt.signal;
    const report = () => {
      if (ended) return; // a straggler after the end tells nothing
      const now = clock.snapshot();
      floor = Math.max(floor, now.progress);
      onProgress({ phase: now.phase, progress: floor, etaSeconds: now.etaSeconds });
    };
    const ticker = setInterval(report, REPORT_EVERY_MS);
    const tell = onSegments && ((segments: Segment[]) => void (ended || onSegments(segments)));
    const run: Run = { request, checkpoint, clock, report, signal: stop, onSegments: tell, resumed: [] };
    try {
      const kept = await checkpoint.transcript();
      if (kept) {
        run.resumed.push("transcript");
        for (const phase of ["decoding", "detecting_speech", "diarizing", "transcribing"] as const) clock.finish(phase);
      }
      const transcript = kept ?? (await this.transcribe(run));
      if (request.translateTo) await this.translate(run, transcript, request.translateTo);
      clock.complete();
      report();
      logger.info(
        { input: request.displayName, model: request.model, duration: transcript.duration, ms: Date.now() - started, ...(run.resumed.length ? { resumed: run.resumed } : {}) },
        "transcribed",
      );
      return transcript;
    } catch (err) {
      // Whatever a stopped run threw (ffmpeg's AbortError, the chat engine's), it was stopped, not failed.
      if (signal?.aborted) throw new JobAbortedError();
      throw err;
    } finally {
      ended = true;
      halt.abort();
      clearInterval(ticker);
      // a resumable run's folder is its caller's to remove once the job has ended (its result written)
      if (!request.resumable) await rm(request.workDir, { recursive: true, force: true });
    }
  }

  /** Decoding, voice detection, whisper and speakers: the transcript before translation, kept once made. */
  private async transcribe(run: Run): Promise<Transcript> {
    const { request, checkpoint, clock, report, signal } = run;
    const samples = await this.decode(run);
    const duration = samples / SAMPLE_RATE;
    if (signal?.aborted) throw new JobAbortedError();

    const speakers = request.diarization ? this.speakers(run, request.diarization) : undefined;
    speakers?.catch(() => undefined); // awaited below; never an unhandled rejection meanwhile
    let spans = await checkpoint.speech();
    if (spans) run.resumed.push("speech");
    else {
      clock.enter("detecting_speech", duration);
      report();
      spans = await detectSpeech(
        checkpoint.pcmPath,
        { ...this.options.vad, ...request.vad },
        (f) => {
          clock.advance("detecting_speech", f * duration);
          report();
        },
        signal,
      );
      await checkpoint.saveSpeech(spans);
    }
    clock.finish("detecting_speech");
    const chunks = planChunks(spans, samples);
    const speech = chunkSeconds(chunks);
    this.options.logger.debug({ input: request.displayName, duration, spans: spans.length, chunks: chunks.length, speech }, "voice activity");

    const segments = await this.decodeChunks(run, chunks, speech);
    const detected = request.language ? undefined : majority(segments.languages);
    const language = request.language ?? detected ?? "unknown";
    const probability = detected !== undefined ? segments.probabilities.get(detected) : undefined;
    let list = segments.list;
    let turns: SpeakerTurn[] | undefined;
    if (speakers) {
      clock.enter("diarizing");
      report();
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
    await checkpoint.saveTranscript(transcript);
    return transcript;
  }

  /** The decoded audio's sample count: kept from an earlier run when whole, else probed and decoded now. */
  private async decode(run: Run): Promise<number> {
    const { request, checkpoint, clock, report, signal } = run;
    const kept = await checkpoint.decoded();
    if (kept !== undefined) {
      run.resumed.push("decoded audio");
      clock.expectAudio(kept / SAMPLE_RATE);
      clock.finish("decoding");
      return kept;
    }
    if (this.options.ffmpegFault) throw new EngineError(`ffmpeg cannot decode on this node (${this.options.ffmpegFault}); the file may be fine`);
    clock.enter("decoding");
    report();
    const stall = this.options.ffmpegStallMs !== undefined ? { stallMs: this.options.ffmpegStallMs } : {};
    const probe = await probeAudio(request.input, request.displayName, { ...stall, ...(signal ? { signal } : {}) });
    if (probe.durationSeconds !== undefined && probe.durationSeconds > this.options.maxAudioSeconds) {
      throw new AudioError(`${request.displayName} lasts ${formatDuration(probe.durationSeconds)}, over the ${this.options.maxAudioSeconds / 3600}-hour limit`);
    }
    clock.expectAudio(probe.durationSeconds ?? 60);
    report();
    const samples = await decodeToPcm(request.input, checkpoint.pcmPath, {
      maxSeconds: this.options.maxAudioSeconds,
      displayName: request.displayName,
      ...stall,
      ...(signal ? { signal } : {}),
      onOutput: (bytes) => {
        clock.advance("decoding", bytes / 4 / SAMPLE_RATE);
        report();
      },
    });
    clock.expectAudio(samples / SAMPLE_RATE);
    clock.finish("decoding");
    await checkpoint.saveDecoded(samples);
    return samples;
  }

  /** Speaker turns: kept from an earlier run, else computed beside voice detection and whisper, and kept. */
  private async speakers(run: Run, counts: NonNullable<TranscribeRequest["diarization"]>): Promise<DiarizationSegment[]> {
    const kept = await run.checkpoint.diarization();
    if (kept) {
      run.resumed.push("speakers");
      run.clock.finish("diarizing");
      return kept;
    }
    if (!this.options.diarization) throw new EngineError("speaker diarization needs --segmentation-model and --embedding-model");
    run.clock.startBackground("diarizing");
    const turns = await diarize(run.checkpoint.pcmPath, this.options.diarization, counts, run.signal);
    await run.checkpoint.saveDiarization(turns);
    run.clock.finish("diarizing");
    return turns;
  }

  /**
   * Translates segment by segment (and speaker turn by turn), keeping timings: each keeps its
   * original text in `original_text`; the transcript records `translated_to`. Each segment's
   * translation is kept as it is made: a resumed run translates only the rest.
   */
  private async translate(run: Run, transcript: Transcript, to: string): Promise<void> {
    const { checkpoint, clock, report, signal } = run;
    const translator = this.options.translator;
    if (!translator) throw new EngineError(`translation into "${to}" needs a chat model on this node (--serve)`);
    const done = await checkpoint.translated();
    if (done.size > 0) run.resumed.push(`${done.size} translated segments`);
    clock.enter("translating", transcript.segments.length, done.size);
    report();
    const from = transcript.language;
    for (const seg of transcript.segments) {
      if (signal?.aborted) throw new JobAbortedError();
      seg.original_text = seg.text;
      let text = done.get(seg.id);
      if (text === undefined) {
        text = (await translator(seg.text, from, to, signal)).trim();
        await checkpoint.saveTranslated({ id: seg.id, text });
        done.set(seg.id, text);
      }
      seg.text = text;
      clock.advance("translating", done.size);
      report();
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

  /** Whisper over the chunks an earlier run did not finish; each finished chunk is kept as it ends. */
  private async decodeChunks(run: Run, chunks: Chunk[], speech: number): Promise<Decoded> {
    const { request, checkpoint, clock, report, signal, onSegments } = run;
    const { whisper } = this.options;
    const records: (ChunkRecord | undefined)[] = new Array<ChunkRecord | undefined>(chunks.length);
    let kept = 0;
    let keptSeconds = 0;
    for (const [index, record] of await checkpoint.chunks()) {
      const chunk = chunks[index];
      // the same chunk only: a plan made otherwise (an upgrade that chunks differently) decodes again
      if (!chunk || record.start !== chunk.pieces[0]?.start || record.samples !== chunk.samples) continue;
      records[index] = record;
      kept++;
      keptSeconds += record.seconds;
    }
    if (kept > 0) run.resumed.push(`${kept} of ${chunks.length} chunks`);
    clock.enter("transcribing", speech, keptSeconds);
    report();
    const partial = new Map<number, number>(); // chunk index → seconds decoded so far
    let done = keptSeconds;
    const update = () => {
      clock.advance("transcribing", done + [...partial.values()].reduce((a, b) => a + b, 0));
      report();
    };
    // the segments given to onSegments so far: those of chunks 0 … nextChunk − 1
    let nextChunk = 0;
    let released = 0;
    const releaseInOrder = () => {
      while (records[nextChunk] !== undefined) {
        const finished = records[nextChunk++]!.segments.map((s) => ({ id: released++, ...s }));
        if (finished.length > 0) onSegments?.(finished);
      }
    };
    releaseInOrder();
    const todo = chunks.filter((c) => records[c.index] === undefined);
    if (todo.length > 0) {
      // This run's own whisper engine process: a native crash there fails this job alone.
      const session = whisper.session(request.label ?? basename(request.workDir));
      const pcm = await PcmFile.open(checkpoint.pcmPath).catch((err: unknown) => {
        void session.close();
        throw err;
      });
      // Bounds the chunks held in memory by this job to what whisper can decode at once.
      const inFlight = new Semaphore(whisper.parallel);
      try {
        await Promise.all(
          todo.map(async (chunk) => {
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
              const first = decoded.find((s) => s.lang);
              const record: ChunkRecord = {
                index: chunk.index,
                start: chunk.pieces[0]?.start ?? 0,
                samples: chunk.samples,
                seconds,
                segments: segmentsFromChunk(chunk, decoded),
                ...(first?.lang ? { lang: first.lang } : {}),
                ...(first?.lang && first.langProb !== undefined ? { langProb: first.langProb } : {}),
              };
              await checkpoint.saveChunk(record);
              partial.delete(chunk.index);
              done += seconds;
              records[chunk.index] = record;
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
    }
    clock.finish("transcribing");
    return summarize(records as ChunkRecord[]);
  }
}

/** The transcript's segments in time order, and the languages the chunks heard weighted by their speech. */
function summarize(records: readonly ChunkRecord[]): Decoded {
  const languages = new Map<string, number>();
  // per detected language: its probabilities weighted by the seconds of the chunks that detected it
  const probabilities = new Map<string, { sum: number; seconds: number }>();
  for (const r of records) {
    if (!r.lang) continue;
    languages.set(r.lang, (languages.get(r.lang) ?? 0) + r.seconds);
    if (r.langProb !== undefined) {
      const p = probabilities.get(r.lang) ?? { sum: 0, seconds: 0 };
      probabilities.set(r.lang, { sum: p.sum + r.langProb * r.seconds, seconds: p.seconds + r.seconds });
    }
  }
  const list = records
    .flatMap((r) => r.segments)
    .sort((a, b) => a.start - b.start)
    .map((s, id) => ({ id, ...s }));
  return { list, languages, probabilities };
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

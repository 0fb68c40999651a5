/**
 * Transcriptions the scheduler sends over the fleet link (`POST /v1/audio/…` on the scheduler).
 *
 * A TranscriptionRequest carries the job's options (typed; from an older scheduler, the form's
 * fields), bounded here as an upload's are; its upload follows in AudioChunks, written to
 * a staged upload of the job service (charged to its staging budget, as an HTTP upload is) and
 * acknowledged once stored, so the scheduler never has more than its window in flight: the
 * agent's memory holds at most that much of any upload. After the last chunk the job is queued
 * like one from port 7860; its finished segments go back as they come, then the transcript (typed
 * to a scheduler that sent typed options, else as JSON text: fleet.proto, above TranscriptionRequest),
 * and the job is removed (a tenant's words are not kept on the node past their delivery).
 *
 * Every request ends with exactly one TranscriptionDone or CompletionError; a cancel or the loss
 * of the link removes the upload or the job.
 */
import { createWriteStream, type WriteStream } from "node:fs";
import { ConflictError, ApiError, PayloadTooLargeError, ServiceUnavailableError, UpstreamError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { DEFAULT_WHISPER_MODEL } from "../../models/whisper.js";
import type { AgentMessage, Transcription, TranscriptionRequest__Output } from "../../proto/index.js";
import type { AudioChunk__Output } from "../../proto/gen/kiln/v1/AudioChunk.js";
import { parseJobFields } from "../../speech/fields.js";
import type { JobOptions } from "../../speech/options.js";
import { doneAnswer, jobOptionsOf, readsTyped, segmentsAnswer } from "../../speech/wire.js";
import type { WhisperPool } from "../asr/whisper.js";
import { checkRunnable, type JobEvent, type JobService, type NodeCapabilities, type StagedUpload, type UploadTicket } from "../jobs/index.js";
import { AUDIO_RETRYABLE, WIRE } from "../../core/wire-codes.js";

export interface FleetTranscriptionsOptions {
  jobs: JobService;
  whisper: WhisperPool;
  capabilities: NodeCapabilities;
  /** Largest upload taken, in bytes (the agent's --max-upload). */
  maxFileBytes: number;
  /** Throws 503 `engine_unavailable` when this node cannot transcribe at all (checkPipeline): another node may take the request. */
  pipeline: () => Promise<void>;
  /**
   * Why ffmpeg failed the start check, when it did: the node then registers without transcription
   * (an idle node that refuses every job would be picked first), and the scheduler answers
   * `model_unavailable` unless another node transcribes. Fixed only by a restart, unlike a missing
   * voice-activity model, which the node may be given while it runs (that one `pipeline` refuses per request).
   */
  ffmpegFault?: string;
  logger: Logger;
}

/** One request, from its TranscriptionRequest to its answer. */
interface Transfer {
  id: string;
  trace: string;
  send: (message: AgentMessage) => void;
  /** The link (scheduler) that sent it: only that link's cancel or loss ends it. */
  link?: object;
  /** Its scheduler sent typed options, so it reads typed segments and transcripts (else JSON text). */
  typed: boolean;
  /** Set once the fields are checked and the upload staged. */
  options?: JobOptions;
  staged?: StagedUpload;
  ticket?: UploadTicket;
  out?: WriteStream;
  /** Bytes received (written or queued to be). */
  received: number;
  /** The chunks' writes, one after the other (never rejects: a failed write ends the request). */
  writing: Promise<void>;
  /** The job, once the upload is complete. */
  jobId?: string;
  unsubscribe?: () => void;
  ended: boolean;
}

export class FleetTranscriptions {
  private readonly transfers = new Map<string, Transfer>();
  /** What Register tells the scheduler, as `refresh` last found it. */
  description: Transcription = { models: [], default_model: "", slots: 0, capabilities: [], max_file_bytes: 0 };

  constructor(private readonly options: FleetTranscriptionsOptions) {}

  /** Reads the installed models again into `description` (Register tells them). */
  async refresh(): Promise<Transcription> {
    this.description = await this.describe();
    return this.description;
  }

  /** What Register tells the scheduler: the installed models, the default, the slots and limits; none of it when ffmpeg failed the start check. */
  private async describe(): Promise<Transcription> {
    if (this.options.ffmpegFault) {
      this.options.logger.warn("this node registers without transcription: its ffmpeg failed the start check (logged above)");
      return { models: [], on_demand_models: [], default_model: "", slots: 0, capabilities: [], max_file_bytes: 0 };
    }
    const models = await this.options.whisper.status();
    const installed = models.filter((m) => m.installed).map((m) => m.name);
    // `whisper-1` is the catalog's default when installed, else the largest installed
    const fallback = this.options.whisper.catalog.models.filter((m) => installed.includes(m.name)).at(-1)?.name ?? "";
    return {
      models: installed,
      // the scheduler sends a job for one of these here when no node has it installed: it is downloaded first
      on_demand_models: models.filter((m) => !m.installed && m.on_demand).map((m) => m.name),
      default_model: installed.includes(DEFAULT_WHISPER_MODEL) ? DEFAULT_WHISPER_MODEL : fallback,
      slots: this.options.jobs.concurrency,
      capabilities: [...(this.options.capabilities.diarization ? ["diarization"] : []), ...(this.options.capabilities.translation ? ["translation"] : [])],
      max_file_bytes: this.options.maxFileBytes,
    };
  }

  /** Requests under way (uploading or transcribing): a draining node waits for them. */
  get active(): number {
    return this.transfers.size;
  }

  /** Jobs running or waiting, from every source: the heartbeat's `transcription_jobs`. */
  get load(): number {
    const { running, queued } = this.options.jobs.counts();
    return running + queued;
  }

  /** A new request: its fields are checked and its upload staged; refused at once when it cannot run. */
  async start(req: TranscriptionRequest__Output, send: (message: AgentMessage) => void, draining: boolean, link?: object): Promise<void> {
    const t: Transfer = {
      id: req.request_id,
      trace: req.trace_id,
      send,
      ...(link ? { link } : {}),
      typed: readsTyped(req),
      received: 0,
      writing: Promise.resolve(),
      ended: false,
    };
    if (this.transfers.has(t.id)) return; // a repeated id: the first stands
    this.transfers.set(t.id, t);
    // the chunks that follow wait for this: they are written once the upload is staged
    const step = (async () => {
      if (draining) throw new ServiceUnavailableError(WIRE.draining, "the node is draining");
      // the operator's detail (a model's path) stays in this node's log: the request comes from a tenant
      await this.options.pipeline().catch((err: unknown) => {
        this.options.logger.error({ requestId: t.trace, err: (err as Error).message }, "fleet transcription refused: this node cannot transcribe");
        throw new ServiceUnavailableError("engine_unavailable", "a node cannot transcribe now (a model or the ffmpeg it needs is missing; its log names it)");
      });
      const options = jobOptionsOf(req, this.options.whisper.catalog) ?? parseJobFields({}, this.options.whisper.catalog);
      await checkRunnable(options, this.options.whisper, this.options.capabilities);
      t.options = { ...options, fleet: true };
      // the uploads still arriving will want a place in the queue too
      this.options.jobs.ensureRoom(1 + [...this.transfers.values()].filter((o) => o !== t && !o.ended && o.jobId === undefined && o.options).length);
      t.ticket = await this.options.jobs.admit();
      if (t.ended) return;
      t.staged = await this.options.jobs.stage(sanitizeName(req.file_name), t.ticket);
      if (t.ended) return;
      t.out = createWriteStream(t.staged.path);
      t.out.on("error", () => undefined); // failures surface through the writes below
    })();
    t.writing = step.catch(() => undefined);
    await step.catch((err: unknown) => this.fail(t, err));
  }

  /** The next bytes of a request's upload; the last one (with the options of every form field) queues the job. */
  chunk(audio: Pick<AudioChunk__Output, "request_id" | "data" | "last"> & Partial<AudioChunk__Output>): void {
    const { request_id: id, data, last } = audio;
    const t = this.transfers.get(id);
    if (!t || t.ended) return;
    t.received += data.length;
    if (t.received > this.options.maxFileBytes) {
      void this.fail(t, new PayloadTooLargeError("file_too_large", `file: larger than this node's ${this.options.maxFileBytes}-byte limit`));
      return;
    }
    const step = t.writing.then(async () => {
      if (t.ended) return;
      if (!t.staged || !t.out) throw new ConflictError("upload_before_request", "file: audio arrived for a request that was not accepted");
      if (data.length > 0) {
        await this.options.jobs.charge(t.staged, data.length);
        await new Promise<void>((resolve, reject) => t.out!.write(data, (err) => (err ? reject(err) : resolve())));
        if (!t.ended) t.send({ transcription_ack: { request_id: t.id, stored_bytes: t.staged.bytes } });
      }
      if (last) {
        // the fields that came after the file complete the request's: checked again, all together
        const options = jobOptionsOf(audio, this.options.whisper.catalog);
        if (options) {
          t.options = { ...options, fleet: true };
          await checkRunnable(t.options, this.options.whisper, this.options.capabilities);
        }
        await this.submit(t);
      }
    });
    t.writing = step.catch(() => undefined);
    step.catch((err: unknown) => this.fail(t, err));
  }

  /** The scheduler cancelled the request (its client went away): the upload or the job goes. */
  cancel(id: string, link?: object): void {
    const t = this.transfers.get(id);
    if (t && !t.ended && (link === undefined || t.link === link)) void this.fail(t, new UpstreamError(WIRE.cancelled, "the request was cancelled"));
  }

  /** A link went down: nothing can be delivered to its scheduler, so its requests go (the scheduler retries or fails them); none: every request. */
  dropAll(link?: object): void {
    for (const t of this.transfers.values())
      if (!t.ended && (link === undefined || t.link === link)) void this.fail(t, new UpstreamError(WIRE.cancelled, "the scheduler link went down"), false);
  }

  private async submit(t: Transfer): Promise<void> {
    await new Promise<void>((resolve, reject) => t.out!.end((err?: Error | null) => (err ? reject(err) : resolve())));
    this.options.jobs.settle(t.ticket!);
    const [job] = this.options.jobs.submit([t.staged!], t.options!);
    t.jobId = job!.job_id;
    t.staged = undefined; // the job owns the file now
    this.options.logger.info({ requestId: t.trace, job: t.jobId, bytes: t.received }, "fleet transcription queued");
    const unsubscribe = await this.options.jobs.watch(t.jobId, (event) => void this.onJobEvent(t, event).catch((err: unknown) => this.fail(t, err)));
    if (t.ended)
      unsubscribe(); // it ended while the watch began
    else t.unsubscribe = unsubscribe;
  }

  private async onJobEvent(t: Transfer, event: JobEvent): Promise<void> {
    if (t.ended) return;
    if (event.type === "segment") {
      t.send({ transcription_segments: segmentsAnswer(t.id, [event.segment], t.typed) });
      return;
    }
    if (event.type !== "done") return;
    if (event.status === "completed") {
      const transcript = await this.options.jobs.result(t.jobId!);
      if (t.ended) return;
      t.ended = true;
      t.send({ transcription_done: doneAnswer(t.id, transcript, t.typed) });
      await this.finish(t);
      return;
    }
    const code = event.status === "cancelled" ? "cancelled" : (event.code ?? "transcription_failed");
    await this.fail(t, new UpstreamError(code, event.error ?? `the job ended ${event.status}`));
  }

  /** Ends the request with an error sent to the scheduler (unless `tell` is false), removing what it left. */
  private async fail(t: Transfer, err: unknown, tell = true): Promise<void> {
    if (t.ended) return;
    t.ended = true;
    const e = err instanceof ApiError ? err : undefined;
    const code = e?.code ?? "transcription_failed";
    // A refusal before any of it ran (a full queue, a draining node, a model or capability this
    // node lacks) may go to another node.
    const retryable = AUDIO_RETRYABLE.has(code) || e?.status === 507;
    if (!e) this.options.logger.error({ requestId: t.trace, err }, "fleet transcription failed");
    if (tell) t.send({ error: { request_id: t.id, code, message: e?.message ?? "transcription failed on the node (logged under its request id)", retryable } });
    await this.finish(t);
  }

  /** Removes the request's staged upload or its job, and forgets it. */
  private async finish(t: Transfer): Promise<void> {
    t.unsubscribe?.();
    t.out?.destroy();
    if (t.ticket) this.options.jobs.settle(t.ticket);
    await t.writing.catch(() => undefined);
    try {
      if (t.staged) await this.options.jobs.discard([t.staged]);
      if (t.jobId) await this.options.jobs.remove(t.jobId);
    } catch (err) {
      this.options.logger.warn({ requestId: t.trace, err }, "could not remove a fleet transcription's files");
    } finally {
      this.transfers.delete(t.id);
    }
  }
}

/** Refusals another node may not give (a larger --max-upload, a free queue, the model). */

/** A file name as the job's display name: its last path part, printable, at most 200 characters. */
function sanitizeName(name: string): string {
  const base = name.split(/[/\\]/).pop() ?? "";
  // eslint-disable-next-line no-control-regex
  const clean = base.replace(/[\u0000-\u001f\u007f]/g, "").slice(0, 200);
  return clean || "audio";
}

/**
 * Transcriptions through the fleet: the router behind `POST /v1/audio/transcriptions` and
 * `/translations`.
 *
 * Agents that transcribe say so in Register (their installed whisper models, those they download
 * when a job names one, `whisper-1`'s model, their slots) and tell their jobs in each heartbeat. A request goes to the least-loaded agent with
 * its model and capabilities; its upload, held in a `Spool` on the scheduler's disk, streams to the
 * agent in AudioChunks as it arrives, never more than `windowBytes` beyond what the agent has
 * acknowledged storing. The agent's queue is the queue: a full one refuses (retryable) and the
 * request goes elsewhere.
 *
 * Failure rules: an agent lost, or refusing with a retryable error, before the client saw any of the
 * transcript sends the request to another agent, from the spool's first byte (each attempt under a
 * request id of its own); after that, or past `maxAttempts`, the client gets a 502.
 */
import { randomUUID } from "node:crypto";
import { InvalidRequestError, PayloadTooLargeError, ServiceUnavailableError, UpstreamError, type ApiError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { CompletionError__Output, Transcription__Output } from "../../proto/index.js";
import type { TranscriptionDone__Output } from "../../proto/gen/kiln/v1/TranscriptionDone.js";
import type { TranscriptionSegments__Output } from "../../proto/gen/kiln/v1/TranscriptionSegments.js";
import type { JobOptions } from "../../speech/options.js";
import { segmentSchema, transcriptSchema, type Segment, type Transcript } from "../../speech/transcript.js";
import { optionsToWire, segmentFromWire, transcriptFromWire } from "../../speech/wire.js";
import type { Spool } from "../audio/spool.js";
import { audioSecondsBound } from "../audio/duration.js";
import { Channel } from "./channel.js";
import { MESSAGE_CAPS } from "./limits.js";
import type { AgentLink } from "./types.js";
import { z } from "zod";
import { AUDIO_CLIENT_FAULTS, WIRE } from "../../core/wire-codes.js";
import { relayedCode } from "../../core/error-codes.js";

/** The model name every transcribing agent answers to: its own default whisper model. */
export const DEFAULT_AUDIO_MODEL = "whisper-1";

/** What a transcribing agent told in Register. */
export interface TranscriptionInfo {
  /** The whisper models installed. */
  models: ReadonlySet<string>;
  /** Models not installed that it downloads when a job names one (the job waits for the download). */
  onDemand: ReadonlySet<string>;
  defaultModel: string;
  slots: number;
  capabilities: ReadonlySet<string>;
  maxFileBytes: number;
}

export function transcriptionInfo(t: Transcription__Output | null | undefined): TranscriptionInfo | undefined {
  if (!t || (t.models.length === 0 && t.on_demand_models.length === 0) || t.slots < 1) return undefined;
  return {
    models: new Set(t.models),
    onDemand: new Set(t.on_demand_models),
    defaultModel: t.default_model,
    slots: Math.min(t.slots, MAX_SLOTS),
    capabilities: new Set(t.capabilities),
    maxFileBytes: Number(t.max_file_bytes),
  };
}

/** One connected agent, as the router sees it (the fleet's registry entry). */
export interface AudioNode {
  readonly nodeId: string;
  readonly link: AgentLink;
  readonly draining: boolean;
  readonly transcription?: TranscriptionInfo;
  /** Jobs running or waiting on the node, from its latest heartbeat. */
  readonly transcriptionJobs: number;
}

export interface AudioRequest {
  /** `whisper-1` (each agent's default) or an installed model's name. */
  model: string;
  /**
   * The job's options, checked (their `model` replaced by the node's own). They may still change
   * while the upload arrives (fields after the file); they are final once the spool has ended.
   */
  options: JobOptions;
  /** The same as form fields in the agent's vocabulary, without `model`, for an agent from before typed options; final with them. */
  fields: Record<string, string>;
  /** What the agent must be able to do besides: "diarization", "translation". Final with the fields. */
  needs: string[];
  fileName: string;
  spool: Spool;
  /** Whether the client reads the segments as they come (`stream`); without it they are not passed on. */
  streamed: boolean;
}

export type AudioEvent = { type: "segments"; segments: Segment[] } | { type: "done"; transcript: Transcript };

export interface AudioRouterOptions {
  /** The connected agents. */
  nodes: () => Iterable<AudioNode>;
  logger: Logger;
  /** Attempts per request (the first plus retries on other agents). Default 3. */
  maxAttempts?: number;
  /** Upload bytes sent to an agent beyond what it has acknowledged storing. Default 4 MiB. */
  windowBytes?: number;
  /** An agent that acknowledges none of the bytes in flight for this long has lost the upload: it moves on. Default 60 s. */
  ackStallMs?: number;
  /**
   * Told of a node's report past a bound the scheduler computed (a transcript's duration past its
   * upload's), after it is clamped. Counted, never a strike: the bound rests on the tenant's bytes.
   */
  rejected?: (node: AudioNode, kind: "audio_seconds" | "transcript_bytes", detail: Record<string, unknown>) => void;
}

/** The most slots the router believes an agent has (what it says beyond is its own business). */
const MAX_SLOTS = 64;
/** Longest segments message taken from an agent as JSON text (characters); a typed one is held to its message cap before it is decoded. */
const MAX_SEGMENTS_JSON = 1024 ** 2;
/**
 * Segments taken from an agent for one transcription, all messages together (bytes of their JSON:
 * as sent, or, typed, as the scheduler writes them): a transcript's cap.
 */
const MAX_TRANSCRIPT_BYTES = MESSAGE_CAPS.transcription_done;
/** Longest transcript taken from an agent as JSON text (characters); a typed one is held to its message cap before it is decoded. */
const MAX_TRANSCRIPT_JSON = 96 * 1024 ** 2;

interface AudioJob {
  request: AudioRequest;
  traceId: string;
  channel: Channel<AudioEvent>;
  attempts: number;
  failedOn: Set<string>;
  /** True once the client saw part of the transcript: the request can no longer move. */
  started: boolean;
  cancelled: boolean;
  attempt?: Attempt;
  /** The last agent's refusal, told to the client when no other agent can take the request. */
  lastError?: { code: string; message: string };
  /** Bytes of segments its current attempt's node sent, all messages together: at most MAX_TRANSCRIPT_BYTES. */
  segmentBytes?: number;
}

/** One try of a job on one agent. */
interface Attempt {
  id: string;
  node: AudioNode;
  sent: number;
  acked: number;
  /** Wakes the forwarder waiting for acknowledgements. */
  wake?: () => void;
  stop: AbortController;
}

/** Agent error codes that are the request's fault: the client's 400 (or 413), with the agent's message. */

export class AudioRouter {
  private readonly attempts = new Map<string, AudioJob>();
  /** Requests each node runs for this router (its heartbeat may not count them yet). */
  private readonly inflight = new Map<string, number>();
  private readonly maxAttempts: number;
  private readonly windowBytes: number;
  private readonly ackStallMs: number;

  constructor(private readonly options: AudioRouterOptions) {
    this.maxAttempts = options.maxAttempts ?? 3;
    this.windowBytes = options.windowBytes ?? 4 * 1024 ** 2;
    this.ackStallMs = options.ackStallMs ?? 60_000;
  }

  /** The models some connected agent transcribes with (`whisper-1` when any does). */
  models(): string[] {
    const names = new Set<string>();
    for (const node of this.options.nodes()) {
      if (!node.transcription || node.draining) continue;
      if (node.transcription.defaultModel) names.add(DEFAULT_AUDIO_MODEL);
      for (const m of [...node.transcription.models, ...node.transcription.onDemand]) names.add(m);
    }
    return [...names];
  }

  /** Whether some connected agent runs `model` with every capability in `needs`. */
  serves(model: string, needs: readonly string[] = []): boolean {
    for (const node of this.options.nodes()) if (this.fits(node, model, needs)) return true;
    return false;
  }

  /**
   * Starts a transcription: its upload streams to an agent as the spool fills. Events arrive on
   * the returned iterable; errors are thrown from it as KilnErrors. Aborting `signal` cancels it.
   */
  submit(request: AudioRequest, signal: AbortSignal | undefined, traceId: string): AsyncIterable<AudioEvent> {
    if (!this.serves(request.model, request.needs)) {
      const why = this.serves(request.model) ? ` with ${request.needs.join(" and ")}` : "";
      throw new ServiceUnavailableError("model_unavailable", `model: no connected agent transcribes with "${request.model}"${why} right now`);
    }
    if (signal?.aborted) throw new UpstreamError("client_gone", "the client went away before the request was routed");
    const job: AudioJob = { request, traceId, attempts: 0, failedOn: new Set(), started: false, cancelled: false, channel: undefined! };
    job.channel = new Channel<AudioEvent>(() => this.cancel(job));
    signal?.addEventListener("abort", () => this.cancel(job), { once: true });
    this.dispatch(job, "");
    return job.channel;
  }

  // --- the agent side: the fleet passes these on ---------------------------------------------

  /** Whether `requestId` is one of this router's attempts (an agent's error for it comes here). */
  owns(requestId: string): boolean {
    return this.attempts.has(requestId);
  }

  acked(node: AudioNode, requestId: string, storedBytes: number): void {
    const attempt = this.attemptOf(node, requestId);
    if (!attempt) return;
    attempt.acked = Math.max(attempt.acked, Math.min(storedBytes, attempt.sent));
    attempt.wake?.();
  }

  /** Segments of a transcription: typed, or an older agent's JSON text (fleet.proto, above TranscriptionRequest). */
  segments(node: AudioNode, message: Pick<TranscriptionSegments__Output, "request_id"> & Partial<TranscriptionSegments__Output>): void {
    const requestId = message.request_id;
    const job = this.jobOf(node, requestId);
    if (!job || !job.request.streamed) return; // only a streamed request passes them on
    const typed = message.segments?.length ? message.segments.map(segmentFromWire) : undefined;
    const json = typed ? JSON.stringify(typed) : (message.segments_json ?? "");
    job.segmentBytes = (job.segmentBytes ?? 0) + Buffer.byteLength(json);
    if (job.segmentBytes > MAX_TRANSCRIPT_BYTES) {
      this.options.rejected?.(node, "transcript_bytes", { request: job.traceId, bytes: job.segmentBytes, bound: MAX_TRANSCRIPT_BYTES });
      return this.failed(node, requestId, "agent_error", `the node sent more segments than a transcript holds (over ${MAX_TRANSCRIPT_BYTES} bytes); it was stopped`, false);
    }
    const schema = z.array(segmentSchema).max(10_000);
    const segments = typed ? checkFromAgent(schema, typed) : json.length <= MAX_SEGMENTS_JSON ? parseFromAgent(schema, json) : undefined;
    if (!segments) return this.failed(node, requestId, "agent_error", "the node sent segments that are not a transcript's", false);
    if (!segments.some((s) => s.text.trim())) return;
    job.started = true; // the client is about to see them: the request can no longer move
    job.channel.push({ type: "segments", segments: segments as Segment[] });
  }

  /** A transcription's result: typed, or an older agent's JSON text (fleet.proto, above TranscriptionRequest). */
  done(node: AudioNode, message: Pick<TranscriptionDone__Output, "request_id"> & Partial<TranscriptionDone__Output>): void {
    const requestId = message.request_id;
    const job = this.jobOf(node, requestId);
    if (!job) return;
    const json = message.transcript_json ?? "";
    const transcript = message.transcript
      ? checkFromAgent(transcriptSchema, transcriptFromWire(message.transcript))
      : json.length <= MAX_TRANSCRIPT_JSON
        ? parseFromAgent(transcriptSchema, json)
        : undefined;
    if (!transcript) return this.failed(node, requestId, "agent_error", "the node sent a result that is not a transcript", false);
    this.attempts.delete(requestId);
    this.release(job);
    void this.bounded(node, job, transcript as Transcript);
  }

  /** Passes `transcript` on, its seconds at most what the upload can hold (scheduler/audio/duration.ts), whatever the node says. */
  private async bounded(node: AudioNode, job: AudioJob, transcript: Transcript): Promise<void> {
    const bound = await audioSecondsBound(job.request.spool.path, job.request.spool.size);
    if (!(transcript.duration <= bound)) {
      this.options.rejected?.(node, "audio_seconds", { request: job.traceId, claimed: transcript.duration, bound });
      transcript.duration = bound;
    }
    job.started = true;
    job.channel.push({ type: "done", transcript });
    job.channel.end();
  }

  /** The agent's error for one of this router's requests. */
  error(node: AudioNode, err: CompletionError__Output): void {
    this.failed(node, err.request_id, err.code, err.message, err.retryable);
  }

  /** An agent left: its requests move to other agents while they can. */
  lost(node: AudioNode, reason: string): void {
    for (const [id, job] of [...this.attempts]) {
      if (job.attempt?.node !== node) continue;
      this.release(job);
      this.attempts.delete(id);
      if (job.cancelled) continue;
      if (job.started) job.channel.fail(new UpstreamError("agent_lost", `the node transcribing this file (${node.nodeId}) went away: ${reason}`));
      else {
        job.failedOn.add(node.nodeId);
        this.dispatch(job, `${node.nodeId} went away`);
      }
    }
  }

  // --- routing --------------------------------------------------------------------------------

  private fits(node: AudioNode, model: string, needs: readonly string[]): boolean {
    const t = node.transcription;
    if (!t || node.draining) return false;
    const has = model === DEFAULT_AUDIO_MODEL ? t.defaultModel !== "" : t.models.has(model) || t.onDemand.has(model);
    return has && needs.every((n) => t.capabilities.has(n));
  }

  /** Whether the node would download `model` first (it fits only on demand). */
  private fetches(node: AudioNode, model: string): boolean {
    return model !== DEFAULT_AUDIO_MODEL && !node.transcription!.models.has(model);
  }

  /** Sends the job to the least-loaded agent that fits (not one it failed on), or fails it. */
  private dispatch(job: AudioJob, why: string): void {
    if (job.attempts >= this.maxAttempts) {
      job.channel.fail(new UpstreamError("agents_failed", `the transcription failed on ${job.attempts} nodes; last: ${why}`));
      return;
    }
    const { request } = job;
    let best: AudioNode | undefined;
    let bestLoad = Infinity;
    for (const node of this.options.nodes()) {
      if (!this.fits(node, request.model, request.needs) || job.failedOn.has(node.nodeId)) continue;
      if (request.spool.size > node.transcription!.maxFileBytes) continue;
      const own = this.inflight.get(node.nodeId) ?? 0;
      // a node that has the model installed goes before any that would download it first
      const load = Math.max(own, node.transcriptionJobs) / node.transcription!.slots + own * 1e-6 + (this.fetches(node, request.model) ? 1e6 : 0);
      if (load < bestLoad) {
        best = node;
        bestLoad = load;
      }
    }
    if (!best) {
      const last = job.lastError;
      job.channel.fail(
        last && (last.code === "file_too_large" || AUDIO_CLIENT_FAULTS.has(last.code))
          ? toClientError(last.code, last.message, false)
          : job.attempts === 0
            ? new ServiceUnavailableError("model_unavailable", `model: no connected agent transcribes with "${request.model}" right now`)
            : new UpstreamError("agents_failed", `the transcription failed on ${job.attempts} node(s) and no other can take it; last: ${why}`),
      );
      return;
    }
    if (why) this.options.logger.info({ requestId: job.traceId, node: best.nodeId, attempt: job.attempts + 1, why }, "transcription moves to another agent");
    const attempt: Attempt = { id: randomUUID(), node: best, sent: 0, acked: 0, stop: new AbortController() };
    job.attempt = attempt;
    job.segmentBytes = 0;
    job.attempts++;
    this.attempts.set(attempt.id, job);
    this.inflight.set(best.nodeId, (this.inflight.get(best.nodeId) ?? 0) + 1);
    void this.forward(job, attempt);
  }

  /** Streams the spool to the attempt's agent, at most `windowBytes` ahead of its acknowledgements. */
  private async forward(job: AudioJob, attempt: Attempt): Promise<void> {
    const { node, id } = attempt;
    const modelOf = () => (job.request.model === DEFAULT_AUDIO_MODEL ? node.transcription!.defaultModel : job.request.model);
    // typed options, and the form's fields beside them for an agent from before them (fleet.proto, above TranscriptionRequest)
    const options = () => ({ options: optionsToWire({ ...job.request.options, model: modelOf() }), fields: { ...job.request.fields, model: modelOf() } });
    node.link.send({ transcription: { request_id: id, trace_id: job.traceId, ...options(), file_name: job.request.fileName } });
    const signal = attempt.stop.signal;
    const onAbort = () => attempt.wake?.();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const data of job.request.spool.read(signal)) {
        while (attempt.sent - attempt.acked >= this.windowBytes && !signal.aborted) {
          const acked = attempt.acked;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, this.ackStallMs);
            attempt.wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          attempt.wake = undefined;
          if (!signal.aborted && attempt.acked === acked && attempt.sent - attempt.acked >= this.windowBytes) {
            return this.failed(node, id, "upload_stalled", `the node stored none of the upload for ${Math.round(this.ackStallMs / 1000)} s`, true);
          }
        }
        if (signal.aborted) return;
        // the stream's own buffer full: wait for it to drain (the agent reads slower than the window allows)
        if (!node.link.send({ audio: { request_id: id, data } })) await node.link.drained?.(signal);
        attempt.sent += data.length;
      }
      node.link.send({ audio: { request_id: id, data: Buffer.alloc(0), last: true, ...options() } });
    } catch (err) {
      if (this.attempts.get(id) !== job) return; // the attempt ended (answered, cancelled, moved)
      this.attempts.delete(id);
      this.release(job);
      node.link.send({ cancel: { request_id: id } });
      // the upload failed or was refused: the HTTP side answers the client; anything else is told here
      if (!job.request.spool.failed) {
        this.options.logger.error({ requestId: job.traceId, node: node.nodeId, err }, "forwarding a transcription's upload failed");
        job.channel.fail(new UpstreamError("upload_failed", "the upload could not be forwarded to the node"));
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  private attemptOf(node: AudioNode, requestId: string): Attempt | undefined {
    const attempt = this.attempts.get(requestId)?.attempt;
    return attempt?.id === requestId && attempt.node === node ? attempt : undefined;
  }

  private jobOf(node: AudioNode, requestId: string): AudioJob | undefined {
    const job = this.attempts.get(requestId);
    return job && !job.cancelled && this.attemptOf(node, requestId) ? job : undefined;
  }

  /** Ends an attempt that failed on its agent: another agent takes it, or the client gets the error. */
  private failed(node: AudioNode, requestId: string, code: string, message: string, retryable: boolean): void {
    const job = this.attempts.get(requestId);
    if (!job || !this.attemptOf(node, requestId)) return;
    this.release(job);
    this.attempts.delete(requestId);
    if (job.cancelled) return;
    // an answer refused here, or an upload given up on: the agent's copy is no longer wanted
    if (code === "agent_error" || code === "upload_stalled") node.link.send({ cancel: { request_id: requestId } });
    if (retryable && !job.started) {
      job.lastError = { code, message };
      job.failedOn.add(node.nodeId);
      this.dispatch(job, `${node.nodeId}: ${message}`);
      return;
    }
    job.channel.fail(toClientError(code, message, job.started));
  }

  /** Frees the job's place on its agent and stops its forwarder. */
  private release(job: AudioJob): void {
    const attempt = job.attempt;
    if (!attempt) return;
    job.attempt = undefined;
    attempt.stop.abort();
    const left = (this.inflight.get(attempt.node.nodeId) ?? 1) - 1;
    if (left > 0) this.inflight.set(attempt.node.nodeId, left);
    else this.inflight.delete(attempt.node.nodeId);
  }

  private cancel(job: AudioJob): void {
    if (job.cancelled) return;
    job.cancelled = true;
    job.channel.fail(new UpstreamError("cancelled", "the request was cancelled"));
    const attempt = job.attempt;
    if (!attempt) return;
    this.attempts.delete(attempt.id);
    this.release(job);
    attempt.node.link.send({ cancel: { request_id: attempt.id } });
  }
}

/** JSON from an agent checked against `schema`; undefined when it does not fit. */
function parseFromAgent<T>(schema: z.ZodType<T>, json: string): T | undefined {
  try {
    return checkFromAgent(schema, JSON.parse(json));
  } catch {
    return undefined;
  }
}

/** What an agent sent, decoded, checked against `schema`; undefined when it does not fit. */
function checkFromAgent<T>(schema: z.ZodType<T>, value: unknown): T | undefined {
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

function toClientError(code: string, message: string, started: boolean): ApiError {
  if (started) return new UpstreamError(relayedCode(code) || WIRE.agentError, message);
  if (code === "file_too_large") return new PayloadTooLargeError("file_too_large", message);
  if (AUDIO_CLIENT_FAULTS.has(code)) return new InvalidRequestError(relayedCode(code), /^[a-z_]+:/.test(message) ? message : `file: ${message}`);
  return new UpstreamError(relayedCode(code) || WIRE.agentError, message);
}

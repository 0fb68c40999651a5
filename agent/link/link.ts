/**
 * The agent's link to a scheduler: dials out, authenticates with the node token, registers its
 * pools and hardware, sends heartbeats, runs the completions it is sent and streams them back.
 * Reconnects with capped exponential backoff and jitter whenever the stream ends. An agent of
 * several schedulers has one link to each over one engine (`SchedulerLinks`, `./schedulers.ts`).
 */
import { EventEmitter } from "node:events";
import { freemem, totalmem } from "node:os";
import * as grpc from "@grpc/grpc-js";
import { formatHostPort, type HostPort } from "../../config/index.js";
import type { Logger } from "../../core/log.js";
import {
  fleetProto,
  NODE_TOKEN_METADATA,
  type AgentMessage,
  type CompletionRequest__Output,
  type EmbeddingRequest__Output,
  type FleetClient,
  type Device,
  type Hardware,
  type ModelPool as ModelPoolMessage,
  type ModelState,
  type SchedulerMessage__Output,
} from "../../proto/index.js";
import { AGENT_CAPABILITIES, CHAT_ROLES, type ChatMessage, FLEET_MESSAGE_BYTES, isChatRole, MAX_TOP_LOGPROBS, type ResponseFormat, type ToolCallDelta } from "../../core/chat.js";
import type { ChatMessage__Output } from "../../proto/gen/kiln/v1/ChatMessage.js";
import { responseFormatFromProto, samplingFromProto } from "../../proto/sampling.js";
import { toolFieldsFromProto, toolsFromProto } from "../../proto/tools.js";
import { diskOf } from "../hardware/index.js";
import {
  GenerationAbortedError,
  InvalidResponseFormatError,
  InvalidToolsError,
  LlmEngineError,
  type GenerateOptions,
  type LlmEngine,
  type ModelPool,
  type TokenLogprob,
} from "../llm/index.js";
import type { OfferedDevice, ReplicaReport, Replicas } from "../placement/index.js";
import { Backoff } from "./backoff.js";
import type { FleetTranscriptions } from "./transcriptions.js";
import { ChunkBatcher, type Piece, type WireLogprob } from "./coalesce.js";
import { KILN_VERSION } from "../../core/version.js";
import { WIRE } from "../../core/wire-codes.js";

/** The least a drain waits, once its work is done, for the scheduler to end the stream after reading all of it. */
const DRAIN_END_MS = 5_000;

export interface FleetLinkOptions {
  scheduler: HostPort;
  /** How to dial the scheduler (TLS, see `config/tls.ts`); default plaintext. */
  credentials?: grpc.ChannelCredentials;
  nodeToken: string;
  /** The data directory, whose free disk goes into heartbeats. */
  dataDir?: string;
  nodeId: string;
  engine: LlmEngine;
  hardware: Hardware;
  logger: Logger;
  /** Reconnect backoff; default 250 ms doubling to 30 s. */
  backoff?: Backoff;
  /** Transcriptions from the fleet; absent: the node tells the scheduler it takes none. */
  transcriptions?: FleetTranscriptions;
  /** Longest a generated piece of text waits to share a wire message with the next ones, its own and other completions' (ms); 0 sends each. Default 50. */
  streamIntervalMs?: number;
  /** The agent's links to other schedulers over the same engine, when it has any. */
  peers?: LinkPeers;
  /** The replicas schedulers place on this node (an agent without --serve); absent: it serves its --serve list only. */
  replicas?: Replicas;
}

/** What a link learns of the agent's links to other schedulers, which share its slots. */
export interface LinkPeers {
  /** Slots of `pool` held by completions that the other links' schedulers sent. */
  othersHold(link: FleetLink, pool: ModelPool): number;
  /** This link's completions took or gave back slots: the other links tell their schedulers. */
  changed(link: FleetLink): void;
}

export type LinkState = "connecting" | "connected" | "disconnected" | "stopped";

type Stream = grpc.ClientDuplexStream<AgentMessage, SchedulerMessage__Output>;

export class FleetLink extends EventEmitter<{ state: [LinkState] }> {
  private readonly client: FleetClient;
  private readonly backoff: Backoff;
  private readonly running = new Map<string, AbortController>();
  /**
   * Slots this link's completions hold (or are about to), per stream and pool: what this scheduler
   * sent. Completions of an earlier stream still ending after a reconnect are not the current registration's.
   */
  private readonly streamHolding = new Map<Stream, Map<ModelPool, number>>();
  /** The replicas each stream's Register named, until its Registered. */
  private readonly registered = new Map<Stream, ReplicaReport[]>();
  private stream: Stream | undefined;
  /** The text of the running completions, gathered for the current stream. */
  private chunks: ChunkBatcher | undefined;
  /** Whether the current stream's scheduler reads `chunks` (its Registered said so); else one `chunk` per piece. */
  private acceptsChunks = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private reconnect: NodeJS.Timeout | undefined;
  private draining = false;
  /** Stops listening to the engine's local slot use. */
  private readonly unsubscribeLocal: () => void;
  /** Device memory and free disk as the last interval heartbeat measured them. */
  private measured = { device: { used: 0, total: 0 }, diskFree: 0 };
  state: LinkState = "disconnected";

  constructor(private readonly options: FleetLinkOptions) {
    super();
    const Fleet = fleetProto().kiln.v1.Fleet;
    this.client = new Fleet(formatHostPort(options.scheduler), options.credentials ?? grpc.credentials.createInsecure(), {
      "grpc.keepalive_time_ms": 10_000,
      "grpc.keepalive_timeout_ms": 5_000,
      "grpc.keepalive_permit_without_calls": 1,
      "grpc.max_receive_message_length": FLEET_MESSAGE_BYTES,
      "grpc.max_send_message_length": FLEET_MESSAGE_BYTES,
    });
    this.backoff = options.backoff ?? new Backoff();
    // Slots taken by the agent's own work are told at once (in the same tick, with the last measured
    // memory and disk), so the scheduler hears of a slot taken before it hears the `done` that freed it.
    this.unsubscribeLocal = options.engine.onLocalBusy(() => {
      if (this.stream && this.state === "connected") this.writeHeartbeat(this.stream);
    });
  }

  start(): void {
    if (this.state === "stopped") return;
    this.setState("connecting");
    const metadata = new grpc.Metadata();
    metadata.set(NODE_TOKEN_METADATA, `Bearer ${this.options.nodeToken}`);
    const stream = this.client.Connect(metadata);
    this.stream = stream;
    this.acceptsChunks = false;
    this.chunks = new ChunkBatcher((pieces: Piece[]) => {
      if (this.stream !== stream || stream.destroyed) return;
      if (pieces.length > 1 && this.acceptsChunks) stream.write({ chunks: { chunks: pieces } });
      else for (const piece of pieces) stream.write({ chunk: piece });
    }, this.options.streamIntervalMs ?? 50);
    const { engine, hardware, nodeId } = this.options;
    const transcription = this.options.transcriptions?.description;
    stream.write({
      register: {
        node_id: nodeId,
        agent_version: KILN_VERSION,
        hardware,
        pools: engine.modelPools.filter((p) => !this.placed(p)).map(poolToProto),
        // a node that transcribes: it has a whisper model, or downloads the one a job names
        ...(transcription?.models?.length || transcription?.on_demand_models?.length ? { transcription } : {}),
        // a placeable node: its devices' memory, and the replicas placed on it already (ready ones are in neither pools list twice)
        ...(this.options.replicas ? { placeable: true, devices: this.options.replicas.offered().map(deviceToProto), replicas: this.registerReplicas(stream) } : {}),
      },
    });
    stream.on("data", (message: SchedulerMessage__Output) => this.onMessage(stream, message));
    stream.on("error", (err: grpc.ServiceError) => {
      if (err.code === grpc.status.UNAUTHENTICATED) this.options.logger.error({ details: err.details }, "the scheduler refused this node's token; check --node-token");
      else if (err.code === grpc.status.PERMISSION_DENIED || err.code === grpc.status.INVALID_ARGUMENT)
        // details says which: the node id, a model or the slots its token does not allow, or a client certificate of another name
        this.options.logger.error(
          { details: err.details, node: nodeId },
          `the scheduler refused this node's registration: ${err.details}; check --node-id, --serve, --sequences and the scheduler's --node-tokens and --max-node-slots`,
        );
      else if (err.code === grpc.status.RESOURCE_EXHAUSTED)
        this.options.logger.error({ details: err.details, node: nodeId }, "the scheduler closed this link: a message past its size cap");
      else if (err.code === grpc.status.ALREADY_EXISTS)
        this.options.logger.error({ details: err.details, node: nodeId }, "another agent is connected under this node id with another token; check --node-id");
      else if (err.code !== grpc.status.CANCELLED) this.options.logger.warn({ code: err.code, details: err.details }, "scheduler stream failed");
      this.onClosed(stream);
    });
    // grpc-js always ends a call with "status" (not always with "close").
    stream.on("status", () => this.onClosed(stream));
    stream.on("close", () => this.onClosed(stream));
  }

  /**
   * Stops taking work, tells the scheduler, lets running completions finish within `deadlineMs`,
   * then closes the link.
   */
  async drain(deadlineMs: number): Promise<void> {
    this.draining = true;
    this.stream?.write({ draining: { deadline_ms: deadlineMs } });
    const until = Date.now() + deadlineMs;
    const busy = () => this.running.size + (this.options.transcriptions?.active ?? 0);
    while (busy() > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    // The last messages (a final `done`) must reach the scheduler before the stream goes away: this
    // side's end follows them, and the scheduler ends its side once it has read it. Until then a
    // cancel would drop what a busy scheduler has not read yet ('finish' only says the end was queued).
    const stream = this.stream;
    if (stream && !stream.destroyed) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          stream.off("status", done).off("error", done).off("close", done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(DRAIN_END_MS, until - Date.now()));
        stream.once("status", done).once("error", done).once("close", done);
        stream.end();
      });
    }
    await this.stop();
  }

  async stop(): Promise<void> {
    this.setState("stopped");
    this.unsubscribeLocal();
    clearTimeout(this.reconnect);
    clearInterval(this.heartbeat);
    for (const ac of this.running.values()) ac.abort();
    this.stream?.cancel();
    this.client.close();
  }

  private onMessage(stream: Stream, message: SchedulerMessage__Output): void {
    switch (message.body) {
      case "registered":
        this.acceptsChunks = message.registered!.accepts_chunks;
        this.retellReplicas(stream);
        this.backoff.reset();
        this.setState("connected");
        this.options.logger.info({ scheduler: formatHostPort(this.options.scheduler), heartbeatMs: message.registered!.heartbeat_interval_ms }, "registered with the scheduler");
        clearInterval(this.heartbeat);
        this.heartbeat = setInterval(() => void this.sendHeartbeat(stream), Math.max(100, message.registered!.heartbeat_interval_ms));
        return;
      case "completion":
        void this.run(stream, message.completion!);
        return;
      case "embedding":
        void this.embed(stream, message.embedding!);
        return;
      case "cancel":
        this.running.get(message.cancel!.request_id)?.abort();
        this.options.transcriptions?.cancel(message.cancel!.request_id, this);
        return;
      case "transcription": {
        const send = (m: AgentMessage): void => {
          if (this.stream === stream && !stream.destroyed) stream.write(m);
        };
        const transcriptions = this.options.transcriptions;
        if (transcriptions) void transcriptions.start(message.transcription!, send, this.draining, this);
        else send({ error: { request_id: message.transcription!.request_id, code: WIRE.transcriptionUnavailable, message: "this node takes no transcriptions", retryable: true } });
        return;
      }
      case "audio": {
        this.options.transcriptions?.chunk(message.audio!);
        return;
      }
      case "drain":
        void this.drain(message.drain!.deadline_ms);
        return;
      case "load_model": {
        const order = message.load_model!;
        this.options.replicas?.load({
          modelId: order.model_id,
          source: order.source,
          contextSize: order.context_size,
          sequences: order.sequences,
          split: order.device_bytes.map(Number),
          ...(order.speculative ? { speculative: order.speculative } : {}),
        });
        return;
      }
      case "unload_model":
        this.options.replicas?.unload(message.unload_model!.model_id).catch((err: unknown) => this.options.logger.error({ err: (err as Error).message }, "unload failed"));
        return;
      default:
        return;
    }
  }

  /**
   * Runs one request from the scheduler: refused while draining (another node may take it), else
   * `work` under an AbortController the scheduler's cancel reaches, its answer or its error sent back.
   * `failed` runs before an error is sent and tells whether any of the request's output already went
   * out (then it cannot be retried elsewhere).
   */
  private async serve(
    stream: Stream,
    id: string,
    what: string,
    trace: string,
    work: (signal: AbortSignal) => Promise<{ answer: AgentMessage; log: object }>,
    failed: () => boolean = () => false,
  ): Promise<void> {
    const send = (m: AgentMessage): void => {
      if (this.stream === stream && !stream.destroyed) stream.write(m);
    };
    if (this.draining) {
      send({ error: { request_id: id, code: WIRE.draining, message: "the node is draining", retryable: true } });
      return;
    }
    const ac = new AbortController();
    this.running.set(id, ac);
    try {
      const started = performance.now();
      const { answer, log } = await work(ac.signal);
      send(answer);
      this.options.logger.info({ requestId: trace, ...log, ms: Math.round(performance.now() - started) }, `${what} done`);
    } catch (err) {
      const sentOutput = failed();
      const e = err instanceof LlmEngineError ? err : new LlmEngineError("engine_error", (err as Error).message);
      if (e.code !== WIRE.cancelled) this.options.logger.warn({ requestId: trace, code: e.code, err: e.message }, `${what} failed`);
      const used = e instanceof GenerationAbortedError ? e.usage : undefined;
      send({
        error: {
          request_id: id,
          code: e.code,
          message: e.message,
          retryable: e.retryable && !sentOutput,
          ...(used ? { usage: { prompt_tokens: used.promptTokens, completion_tokens: used.completionTokens } } : {}),
        },
      });
    } finally {
      this.running.delete(id);
    }
  }

  private async run(stream: Stream, req: CompletionRequest__Output): Promise<void> {
    const id = req.request_id;
    const chunks = this.chunks!;
    const pool = this.options.engine.modelPools.find((p) => p.modelIds.includes(req.model));
    const slots = Math.max(1, req.n);
    const peers = this.options.peers;
    if (peers && pool && !this.draining) {
      // Several schedulers fill the same slots: each counts only its own, so two may send to the last
      // one at once. The agent arbitrates: what does not fit is refused now (after a heartbeat saying
      // why), and its scheduler queues it or sends it elsewhere.
      const p = pool;
      const taken = p.localBusy + this.holds(pool) + peers.othersHold(this, pool);
      if (taken + slots > p.slots) {
        this.writeHeartbeat(stream);
        if (this.stream === stream && !stream.destroyed)
          stream.write({
            error: { request_id: id, code: WIRE.nodeBusy, message: `the node's ${p.slots} slots for ${req.model} are taken (other schedulers' work)`, retryable: true },
          });
        return;
      }
    }
    this.hold(stream, pool, slots);
    peers?.changed(this);
    try {
      await this.complete(stream, req, chunks);
    } finally {
      this.hold(stream, pool, -slots);
      peers?.changed(this);
    }
  }

  private complete(stream: Stream, req: CompletionRequest__Output, chunks: ChunkBatcher): Promise<void> {
    const id = req.request_id;
    return this.serve(
      stream,
      id,
      "completion",
      req.trace_id,
      async (signal) => {
        const input = req.prompt !== undefined ? { prompt: req.prompt } : req.messages.map(toTurn);
        const tools = withTools(req);
        const result = await this.options.engine.generate(req.model, input, {
          ...(req.max_tokens !== undefined ? { maxTokens: req.max_tokens } : {}),
          ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
          sampling: samplingFromProto(req),
          ...withFormat(req),
          ...(req.logprobs ? { logprobs: Math.min(req.top_logprobs, MAX_TOP_LOGPROBS) } : {}),
          cacheScope: req.cache_scope,
          signal,
          ...(req.n > 1 ? { n: req.n } : {}),
          ...(tools ? { ...tools, onToolCall: (delta: ToolCallDelta) => chunks.pushToolCall(id, delta) } : {}),
          onText: (text, logprobs, index) => chunks.push(id, text, logprobs?.map(toWireLogprob), index),
        });
        chunks.end(id);
        return {
          answer: {
            done: {
              request_id: id,
              finish_reason: result.finishReason,
              usage: { prompt_tokens: result.promptTokens, completion_tokens: result.completionTokens, cached_tokens: result.cachedTokens },
              ...(result.choices.length > 1 ? { finish_reasons: result.choices.map((c) => c.finishReason) } : {}),
              ...(result.stopText !== undefined ? { stop_text: result.stopText } : {}),
            },
          },
          log: { model: req.model, promptTokens: result.promptTokens, completionTokens: result.completionTokens, finishReason: result.finishReason },
        };
      },
      () => chunks.discard(id),
    );
  }

  private embed(stream: Stream, req: EmbeddingRequest__Output): Promise<void> {
    return this.serve(stream, req.request_id, "embeddings", req.trace_id, async (signal) => {
      const result = await this.options.engine.embed(req.model, req.inputs, { ...(req.dimensions ? { dimensions: req.dimensions } : {}), signal });
      return {
        answer: { embeddings: { request_id: req.request_id, vectors: result.vectors.map((values) => ({ values })), prompt_tokens: result.promptTokens } },
        log: { model: req.model, inputs: req.inputs.length, promptTokens: result.promptTokens },
      };
    });
  }

  /** Slots of `pool` this link's completions hold. */
  holds(pool: ModelPool): number {
    let n = 0;
    for (const held of this.streamHolding.values()) n += held.get(pool) ?? 0;
    return n;
  }

  /** Counts `slots` (negative: given back) of `pool` held by a completion of `stream`. */
  private hold(stream: Stream, pool: ModelPool | undefined, slots: number): void {
    if (!pool) return;
    let mine = this.streamHolding.get(stream);
    if (!mine) this.streamHolding.set(stream, (mine = new Map()));
    const now = (mine.get(pool) ?? 0) + slots;
    if (now === 0) mine.delete(pool);
    else mine.set(pool, now);
    if (mine.size === 0) this.streamHolding.delete(stream);
  }

  /** Whether `pool` is a replica a scheduler placed (it is registered as a replica, not a pool). */
  private placed(pool: ModelPool): boolean {
    return this.options.replicas?.reports().some((r) => r.pool === pool) ?? false;
  }

  /** The replicas a Register names, remembered for the stream: what changed before its Registered is told again then. */
  private registerReplicas(stream: Stream): ModelState[] {
    const reports = this.options.replicas!.reports();
    this.registered.set(stream, reports);
    return reports.map(stateToProto);
  }

  /** Once registered: replicas whose state changed since the Register (reports sent meanwhile were not delivered) are told again. */
  private retellReplicas(stream: Stream): void {
    const sent = this.registered.get(stream);
    this.registered.delete(stream);
    const replicas = this.options.replicas;
    if (!sent || !replicas) return;
    const now = replicas.reports();
    for (const r of now) if (!sent.some((s) => s.modelId === r.modelId && s.phase === r.phase)) stream.write({ model_state: stateToProto(r) });
    for (const s of sent)
      if (!now.some((r) => r.modelId === s.modelId)) stream.write({ model_state: stateToProto({ modelId: s.modelId, phase: "unloaded", progress: 0, split: [] }) });
  }

  /** Tells this link's scheduler a replica's state (the agent tells every scheduler). */
  tellReplica(report: ReplicaReport): void {
    const stream = this.stream;
    if (stream && this.state === "connected" && !stream.destroyed) stream.write({ model_state: stateToProto(report) });
  }

  /** Tells the scheduler the slots as they are now (another link's work took or freed some). */
  tellSlots(): void {
    if (this.stream && this.state === "connected") this.writeHeartbeat(this.stream);
  }

  /** The scheduler this link dials. */
  get address(): string {
    return formatHostPort(this.options.scheduler);
  }

  /** Measures device memory and free disk (asynchronous), then writes a heartbeat. */
  private async sendHeartbeat(stream: Stream): Promise<void> {
    const device = await this.options.engine.memory().catch(() => ({ used: 0, total: 0 }));
    const disk = this.options.dataDir ? await diskOf(this.options.dataDir) : { free: 0 };
    this.measured = { device, diskFree: disk.free };
    this.writeHeartbeat(stream);
  }

  /** Writes a heartbeat now: slots as they are, memory and disk as last measured. */
  private writeHeartbeat(stream: Stream): void {
    if (this.stream !== stream || stream.destroyed) return;
    const pools = this.options.engine.modelPools;
    stream.write({
      heartbeat: {
        busy_slots: pools.map((p) => p.busy),
        // slots this scheduler (this registration) did not fill: the agent's own work, what other schedulers
        // sent, and what this link's earlier streams sent that is still ending
        local_busy_slots: pools.map((p) => p.localBusy + (this.options.peers?.othersHold(this, p) ?? 0) + this.holds(p) - (this.streamHolding.get(stream)?.get(p) ?? 0)),
        // pools come and go on a placeable node: each named by its first model, for the scheduler to match
        pool_models: pools.map((p) => p.modelIds[0] ?? ""),
        ...(this.options.replicas ? { devices: this.options.replicas.offered().map(deviceToProto) } : {}),
        memory_used_bytes: totalmem() - freemem(),
        memory_free_bytes: freemem(),
        device_memory_used_bytes: this.measured.device.used,
        device_memory_total_bytes: this.measured.device.total,
        disk_free_bytes: this.measured.diskFree,
        transcription_jobs: this.options.transcriptions?.load ?? 0,
      },
    });
  }

  private onClosed(stream: Stream): void {
    if (this.stream !== stream) return;
    this.stream = undefined;
    this.chunks?.close();
    clearInterval(this.heartbeat);
    // Work from a lost stream cannot be delivered; the scheduler re-routes or fails it.
    for (const ac of this.running.values()) ac.abort();
    this.options.transcriptions?.dropAll(this);
    if (this.state === "stopped" || this.draining) return; // a draining link does not dial again
    this.setState("disconnected");
    const delay = this.backoff.next();
    this.options.logger.info({ delayMs: delay }, "scheduler link down; reconnecting");
    this.reconnect = setTimeout(() => this.start(), delay);
  }

  private setState(state: LinkState): void {
    if (this.state === state) return;
    this.state = state;
    this.emit("state", state);
  }
}

/** A pool as the wire's ModelPool. */
function poolToProto(p: ModelPool): ModelPoolMessage {
  return { model_ids: p.modelIds, slots: p.slots, context_size: p.contextSize, fingerprint: p.fingerprint, capabilities: [...AGENT_CAPABILITIES] };
}

function deviceToProto(d: OfferedDevice): Device {
  return { name: d.name, total_bytes: d.totalBytes, free_bytes: d.freeBytes };
}

const PHASES = { loading: "LOADING", ready: "READY", failed: "FAILED", unloaded: "UNLOADED" } as const;

/** A replica's report as the wire's ModelState. */
function stateToProto(r: ReplicaReport): ModelState {
  return {
    model_id: r.modelId,
    state: PHASES[r.phase],
    progress: r.progress,
    ...(r.reason ? { reason: r.reason.slice(0, 1000) } : {}),
    ...(r.pool ? { pool: poolToProto(r.pool) } : {}),
    device_bytes: [...r.split],
  };
}

/** A wire message as an engine turn; the scheduler validated roles, but the wire is checked anyway. */
function toTurn(m: ChatMessage__Output, i: number): ChatMessage {
  if (!isChatRole(m.role)) throw new LlmEngineError("invalid_request", `messages[${i}].role: "${m.role}" is not one of ${CHAT_ROLES.join(", ")}`);
  return { role: m.role, content: m.content, ...toolFieldsFromProto(m) };
}

/** The request's tools as GenerateOptions, or the engine's error for ones that cannot be read. */
function withTools(req: CompletionRequest__Output): Pick<GenerateOptions, "tools" | "toolChoice" | "parallelToolCalls"> | undefined {
  try {
    return toolsFromProto(req);
  } catch (err) {
    throw new InvalidToolsError((err as Error).message);
  }
}

/** The request's response format as GenerateOptions, or the engine's error for one that cannot be read. */
function withFormat(req: CompletionRequest__Output): { responseFormat?: ResponseFormat } {
  try {
    const format = responseFormatFromProto(req);
    return format ? { responseFormat: format } : {};
  } catch (err) {
    throw new InvalidResponseFormatError((err as Error).message);
  }
}

/** A token's log probability as the wire carries it (raw bytes only where the text is not them). */
function toWireLogprob(l: TokenLogprob): WireLogprob {
  const raw = (bytes?: number[]) => (bytes ? { raw: Uint8Array.from(bytes) } : {});
  return { token: l.token, logprob: l.logprob, ...raw(l.bytes), top_logprobs: l.top.map((t) => ({ token: t.token, logprob: t.logprob, ...raw(t.bytes) })), text_offset: l.offset };
}

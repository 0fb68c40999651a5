/**
 * The fleet registry and router.
 *
 * Agents register pools of slots; the fleet counts each pool's in-flight requests itself (a request
 * holds its slot from dispatch until the agent answers done or error), so routing never waits for a
 * heartbeat to learn about capacity. A request goes to the least-loaded pool serving its model;
 * when none has a free slot it waits, with a timeout, in its account's queue (FIFO). A freed slot
 * goes to the least recently served account with a waiting request that fits (round-robin), so
 * a request waits for the next free slot, not behind another account's flood of waiting requests.
 * The queues together are bounded by `queueSize`.
 *
 * Failure rules: an agent lost (or answering a retryable error) before a request produced any text
 * puts that request back at the head of its account's queue; one that had produced text ends with a 502.
 */
import { formatMemory } from "../../core/bytes.js";
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import type { Logger } from "../../core/log.js";
import { requiredCapabilities } from "../../core/chat.js";
import { ApiError, ConflictError, InvalidRequestError, NotFoundError, ServiceUnavailableError, UpstreamError } from "../../core/errors.js";
import type { AgentMessage__Output, CompletionChunk__Output, ModelPool__Output, ModelState__Output, Register__Output } from "../../proto/index.js";
import { MessageHash, prefixBytes, prefixChain, PrefixRecords } from "./prefixes.js";
import { choosePlacement, Placer, type PlacedModel, type PlacementClaims, type PlacementNode, type PlacementView } from "../placement/index.js";
import { responseFormatToProto, samplingToProto } from "../../proto/sampling.js";
import { messagesToProto, toolsToProto } from "../../proto/tools.js";
import { AudioRouter, transcriptionInfo, type AudioEvent, type AudioNode, type AudioRequest, type TranscriptionInfo } from "./audio.js";
import { Channel } from "./channel.js";
import type { AgentLink, AgentSnapshot, CompletionEvent, CompletionRequest, PoolState, ReplicaSnapshot } from "./types.js";
import { CHAT_CLIENT_FAULTS, WIRE } from "../../core/wire-codes.js";
import { completionReceiveBound, completionTokenBound, MAX_CONTEXT_SIZE, promptTokenBound } from "./limits.js";
import { NodeReplicas } from "./replicas.js";
import { fastest, NodeSpeed, slowness } from "./speed.js";
import { relayedCode } from "../../core/error-codes.js";
import { rememberAtMost } from "../../core/bounded.js";

export interface FleetOptions {
  /** Requests that may wait for a slot, all accounts together; more are refused with 503. */
  queueSize: number;
  /** How long a request may wait for a slot, in ms, before a 503. */
  queueTimeoutMs: number;
  /** Heartbeat interval told to agents, in ms; an agent silent for 3 intervals is dropped. */
  heartbeatMs: number;
  /** Dispatch attempts per request (the first plus retries on other agents). Default 3. */
  maxAttempts?: number;
  /** Upload bytes sent to an agent beyond what it acknowledged storing. Default 4 MiB. */
  audioWindowBytes?: number;
  /**
   * The key of `cache_scope` (an HMAC of the account under it): schedulers sharing a database derive
   * the same one (`KeyService.derivedKey`). Default: a random key of this fleet's own.
   */
  cacheScopeKey?: Uint8Array;
  /** A node whose reports were clamped this many times within `distrustWindowMs` is drained. Default 3. */
  distrustAfter?: number;
  /** Default 10 minutes. */
  distrustWindowMs?: number;
  /**
   * The operator's catalog, when one is in force: a request for a catalog model no node has ready
   * waits while a replica is placed on a placeable node (scheduler/placement). Default: none (models
   * are served where agents' --serve put them).
   */
  placement?: FleetPlacement;
  logger: Logger;
}

/** What placement needs of the catalog, and of the other schedulers. */
export interface FleetPlacement {
  /** The catalog model an id (canonical, not an alias) names. */
  model(id: string): PlacedModel | undefined;
  models(): Iterable<PlacedModel>;
  /** Bytes one replica takes (cached by the caller). */
  size(model: PlacedModel): Promise<number>;
  claims?: PlacementClaims;
}

/** The state of a catalog model, as /v1/models (shape B) shows it. */
export type PlacementStatus = "available" | "loading" | "placeable" | "too_large" | "unavailable";

/** What a node reported beyond a bound the scheduler computed (`kiln_node_reports_rejected_total`'s `kind`). */
export type RejectedReport =
  "prompt_tokens" | "completion_tokens" | "cached_tokens" | "audio_seconds" | "oversized_message" | "completion_text" | "transcript_bytes" | "answer_kind";

/** Why and since when a node gets no work: its reports were clamped too often (`Fleet.snapshot`'s `distrusted`). */
export interface Distrust {
  reason: string;
  /** Unix ms. */
  at: number;
}

/** Keys of drained nodes and strikes remembered at most (node ids and tokens of nodes that lied); the oldest is forgotten beyond. */
const MAX_DISTRUST_KEYS = 10_000;

/** Sets `key` in `map`, forgetting its oldest entry beyond MAX_DISTRUST_KEYS. */
const remember = <V>(map: Map<string, V>, key: string, value: V): void => rememberAtMost(map, key, value, MAX_DISTRUST_KEYS);

/** (node, kind) pairs counted at most; a new pair beyond them counts under node "(other)". */
const MAX_REJECTED_SERIES = 1000;

interface Job {
  id: string;
  /** The HTTP request id, passed to the agent for its logs. */
  traceId: string;
  request: CompletionRequest;
  /** The capabilities a pool needs to run it (core/chat.ts). */
  needs: readonly string[];
  channel: Channel<CompletionEvent>;
  attempts: number;
  /** Nodes this request failed on: a retry goes elsewhere while another node serves its model. */
  failedOn: Set<string>;
  /** Times a node refused it as busy with another scheduler's work (bounded: past it, a failed attempt). */
  busyRefusals: number;
  /** When it must have a slot by (Unix ms), once a busy node sent it back to the queue: waits there add up to --queue-timeout, not one each. */
  queueDeadline?: number;
  /** True once any text reached the client: from then on the request cannot move to another agent. */
  started: boolean;
  assigned?: { agent: Agent; pool: PoolState & { peak: number } };
  queuedTimer?: NodeJS.Timeout;
  cancelled: boolean;
  /** Whether `request.onUsage` was called (it is, at most once). */
  usageTold?: boolean;
  /** The most prompt tokens it can be (limits.ts), computed once. */
  promptBound: number;
  /** When it was last dispatched, and when its first text came (performance.now()). */
  dispatchedAt?: number;
  firstTextAt?: number;
  /** UTF-8 bytes of text and call arguments the node sent for it. */
  textBytes: number;
  /** What the node sent for it in all (text, calls, log-probability tokens; entries), bounded by `completionReceiveBound`. */
  received: { bytes: number; logprobs: number };
  /**
   * Its conversation's prefix chain and each prefix's bytes of text (prefixes.ts), made at its first dispatch (null: not routed by
   * prefix: a raw prompt, embeddings, several choices), and the hash of the reply as it streams.
   */
  prefix?: { chain: string[]; bytes: number[]; reply?: MessageHash } | null;
  /** Its account's cache scope (cacheScope), made at its first dispatch. */
  scope?: string;
}

/** Tells the job's `onUsage` what it used, once; a listener's failure never reaches the fleet. */
function tellUsage(job: Job, promptTokens: number, completionTokens: number): void {
  if (job.usageTold || !job.request.onUsage) return;
  job.usageTold = true;
  try {
    job.request.onUsage({ promptTokens, completionTokens });
  } catch {
    // the usage ledger logs its own failures
  }
}

/**
 * The opaque cache scope of an account (CompletionRequest.cache_scope): an HMAC under a key only
 * schedulers hold, so a node can neither learn account names nor confirm a guessed one.
 */
export function cacheScope(key: Uint8Array, account: string): string {
  return createHmac("sha256", key).update(`kiln-cache-scope\0${account}`).digest("base64url").slice(0, 22);
}

/** Accounts whose cache scope a fleet remembers (Fleet.scopeOf). */
const MAX_REMEMBERED_SCOPES = 10_000;

/** The slots a job holds while it runs: one per choice. */
const slotsOf = (job: Job): number => job.request.n ?? 1;

/** Whether `pool` serves `model` with every capability in `needs`. */
function runs(pool: PoolState, model: string, needs: readonly string[]): boolean {
  return pool.modelIds.has(model) && needs.every((n) => pool.capabilities.has(n));
}

/** Accounts whose latest dispatch is remembered for the round-robin; the least recent is forgotten beyond it. */
const SERVED_ACCOUNTS = 10_000;

class Agent implements AudioNode {
  readonly jobs = new Map<string, Job>();
  draining = false;
  /** Transcription jobs on the node (its latest heartbeat). */
  transcriptionJobs = 0;
  readonly transcription: TranscriptionInfo | undefined;
  lastSeen = Date.now();
  readonly connectedAt = Date.now();
  /** TTFT and tokens/s the scheduler observed. */
  readonly speed = new NodeSpeed();
  /** Set once it is drained for its reports: it gets no work, and shows so. */
  distrusted: Distrust | undefined;
  /** Its devices and the replicas placed on it (a placeable node). */
  readonly placed: NodeReplicas;
  /** The operator drained it (the dashboard): Drain was sent. */
  drainOrdered = false;
  constructor(
    readonly nodeId: string,
    readonly link: AgentLink,
    readonly register: Register__Output,
    readonly pools: (PoolState & { peak: number })[],
  ) {
    this.transcription = transcriptionInfo(register.transcription);
    this.placed = new NodeReplicas(register.placeable, register.devices);
  }
}

/** A pool as the fleet keeps it, from a node's report (Register, or a replica's READY). */
function poolOf(p: ModelPool__Output): PoolState & { peak: number } {
  return {
    modelIds: new Set(p.model_ids),
    slots: p.slots,
    contextSize: p.context_size,
    fingerprint: p.fingerprint,
    capabilities: new Set(p.capabilities),
    inflight: 0,
    local: 0,
    peak: 0,
  };
}

/** A replica loading with no progress reported on its node for this long counts as failed (a stuck download, a load that hangs; a node loads one replica at a time, so any of its progress counts for those queued behind). */
const LOAD_STALL_MS = 10 * 60_000;

/** Busy refusals (`node_busy`) a request may meet before they count as failed attempts: a bound on two schedulers' disagreement. */
const MAX_BUSY_REFUSALS = 20;

export class Fleet {
  private readonly agents = new Map<string, Agent>();
  /** Waiting jobs per account (`""`: requests without one), each queue oldest first; no empty queues. */
  private readonly queues = new Map<string, Job[]>();
  /** Jobs in `queues`, all accounts together (bounded by `queueSize`). */
  private queuedJobs = 0;
  /** The tick of each account's latest dispatch, least recent first; bounded (a forgotten account counts as never served). */
  private readonly lastServed = new Map<string, number>();
  private tick = 0;
  private readonly maxAttempts: number;
  private readonly sweeper: NodeJS.Timeout;
  private readonly log: Logger;
  /** Transcriptions (`/v1/audio/…`) over the same agents. */
  private readonly audio: AudioRouter;
  private readonly scopeKey: Uint8Array;
  /** Each account's cache scope as computed (an HMAC each: about a tenth of a dispatch), the earliest remembered forgotten first past MAX_REMEMBERED_SCOPES. */
  private readonly scopes = new Map<string, string>();
  /** What each pool's slots hold of which conversations (prefixes.ts): a conversation's next turn goes where its cache is. */
  readonly prefixes = new PrefixRecords<PoolState>();
  /**
   * Drained nodes, by `node:<id>` and `token:<credential digest>` (the link's node token): neither
   * registers again (until this scheduler restarts), so a reconnect, or another id under the same
   * token, does not escape the drain. Bounded (MAX_DISTRUST_KEYS, the oldest forgotten).
   */
  private readonly distrust = new Map<string, Distrust>();
  /** When reports past a bound were struck (Unix ms), by the same keys, across reconnects: within the window. Bounded likewise. */
  private readonly strikes = new Map<string, number[]>();
  /** Drained nodes for the dashboard's listing, connected or not, with their last connection's time; bounded likewise. */
  private readonly drainedNodes = new Map<string, { distrusted: Distrust; connectedAt: number }>();
  /** Reports clamped or refused, by node and kind (`kiln_node_reports_rejected_total`). */
  private readonly rejectedCounts = new Map<string, { node: string; kind: RejectedReport; count: number }>();
  /** Places replicas of the operator's catalog models (absent without a catalog). */
  private readonly placer: Placer | undefined;
  /** The registry as placement sees it (its loads and unloads are the placer's and the operator's). */
  private readonly view: PlacementView;
  /**
   * Replicas the operator pinned (the dashboard), by node id: placement never unloads them. In this
   * scheduler's memory only: a restart forgets them, and each scheduler of several has its own. A
   * pin goes with its replica (unloaded, failed) and is kept while its node is away, for a reconnect
   * that still holds the replica.
   */
  private readonly pins = new Map<string, Set<string>>();

  constructor(private readonly options: FleetOptions) {
    this.maxAttempts = options.maxAttempts ?? 3;
    this.log = options.logger;
    this.scopeKey = options.cacheScopeKey ?? randomBytes(32);
    this.audio = new AudioRouter({
      nodes: () => this.agents.values(),
      logger: options.logger,
      maxAttempts: this.maxAttempts,
      // audio seconds past their bound: counted and logged, never a strike, as the bound comes from the tenant's
      // upload, which may mislead it (an honest node's true report past it must not drain the node); others strike
      rejected: (node, kind, detail) => (kind === "audio_seconds" ? this.count(node.nodeId, kind, detail) : this.rejected(node.nodeId, kind, detail)),
      ...(options.audioWindowBytes ? { windowBytes: options.audioWindowBytes } : {}),
    });
    this.view = this.placementView();
    this.placer = options.placement && new Placer({ ...options.placement, view: this.view, logger: options.logger });
    this.sweeper = setInterval(() => {
      this.dropSilentAgents();
      if (!this.placer) return;
      this.dropStalledLoads(Date.now());
      this.placeWaiting(); // room that came without a report (an idle_unload_s run out, another scheduler's claim lapsed)
      void this.placer.keepMinimums();
    }, options.heartbeatMs).unref();
  }

  // --- the client side: HTTP handlers call these ---------------------------------------------

  /** True when some connected, non-draining agent serves `model` (with every capability in `needs`). */
  serves(model: string, needs: readonly string[] = []): boolean {
    return this.mostSlots(model, needs) > 0;
  }

  /** Whether a request for several choices of `model` waits in the queues. */
  private wideWaiting(model: string): boolean {
    for (const queue of this.queues.values()) if (queue.some((j) => j.request.model === model && slotsOf(j) > 1)) return true;
    return false;
  }

  /** The most slots of a connected pool serving `model` with `needs` (of a non-draining agent, unless `draining`). */
  private mostSlots(model: string, needs: readonly string[], draining = false): number {
    let most = 0;
    for (const a of this.agents.values()) if (draining || !a.draining) for (const p of a.pools) if (runs(p, model, needs)) most = Math.max(most, p.slots);
    return most;
  }

  /**
   * Runs a completion somewhere in the fleet. Events arrive on the returned iterable; errors are
   * thrown from it as `ApiError`s. Aborting `signal` (client gone) cancels the work on the agent.
   */
  /**
   * `traceId` (the HTTP request id) travels to the agent for its logs. `request.account` picks the
   * queue the request waits in when every slot is busy.
   */
  submit(request: CompletionRequest, signal?: AbortSignal, traceId = ""): AsyncIterable<CompletionEvent> {
    // a stop text to name is a preference: while the model is served, but by no node that names it (older
    // agents), the stops are not sent, and the scheduler's own match of them in the relayed text ends the reply
    let needs = requiredCapabilities(request);
    if (request.nameStop && !this.serves(request.model, needs)) {
      const unnamed = withoutNamedStops(request);
      const unnamedNeeds = requiredCapabilities(unnamed);
      if (this.serves(unnamed.model, unnamedNeeds)) [request, needs] = [unnamed, unnamedNeeds];
    }
    const placed = this.options.placement?.model(request.model);
    if (placed && !this.serves(request.model, needs)) return this.submitPlaced(request, placed, needs, signal, traceId);
    if (!this.serves(request.model, needs)) {
      if (needs.length > 0 && this.serves(request.model)) {
        throw new ServiceUnavailableError(
          "model_unavailable",
          `model: no connected agent serving "${request.model}" supports ${needs.join(" and ")} (older agents); try again without those fields or after the agents are upgraded`,
        );
      }
      throw new ServiceUnavailableError("model_unavailable", `model: no connected agent serves "${request.model}" right now`);
    }
    const n = request.n ?? 1;
    if (n > 1 && this.mostSlots(request.model, needs) < n) {
      if (this.mostSlots(request.model, needs, true) >= n)
        throw new ServiceUnavailableError("model_unavailable", `n: the agents that run ${n} choices of "${request.model}" at once are draining; try again shortly`);
      throw new InvalidRequestError("invalid_n", `n: ${n} choices, but no agent serving "${request.model}" runs more than ${this.mostSlots(request.model, needs)} at once`, "n");
    }
    const job = this.newJob(request, needs, signal, traceId);
    // behind a waiting request for n choices of its model, it waits too (pump(): the freed slots are kept for that one)
    if (this.wideWaiting(job.request.model) || !this.dispatch(job)) this.enqueue(job);
    return job.channel;
  }

  /**
   * A request for a catalog model no node has ready (with what it needs): it waits in the queue while
   * a replica is placed (or one loads already); a model no node could hold is refused at once.
   */
  private submitPlaced(request: CompletionRequest, model: PlacedModel, needs: readonly string[], signal: AbortSignal | undefined, traceId: string): AsyncIterable<CompletionEvent> {
    const n = request.n ?? 1;
    if (n > model.sequences) throw new InvalidRequestError("invalid_n", `n: ${n} choices, but "${request.model}" runs at most ${model.sequences} at once`, "n");
    const job = this.newJob(request, needs, signal, traceId);
    this.enqueue(job);
    this.placer!.ensure(model.id).catch((err: unknown) => this.failWaiting(model.id, err));
    return job.channel;
  }

  /** Fails every queued request for `model` (a placement that cannot succeed). */
  private failWaiting(model: string, err: unknown): void {
    const error = err instanceof ApiError ? err : new ServiceUnavailableError("model_unavailable", `model: "${model}" could not be placed: ${(err as Error).message}`);
    if (!(err instanceof ApiError)) this.log.warn({ model, err: (err as Error).message }, "placement failed");
    for (const [account, queue] of [...this.queues]) {
      for (let i = queue.length - 1; i >= 0; i--) {
        const job = queue[i]!;
        if (job.request.model !== model) continue;
        this.take(account, queue, i);
        job.channel.fail(error);
      }
    }
  }

  private newJob(request: CompletionRequest, needs: readonly string[], signal: AbortSignal | undefined, traceId: string): Job {
    const job: Job = {
      id: randomUUID(),
      traceId,
      request,
      needs,
      attempts: 0,
      failedOn: new Set(),
      busyRefusals: 0,
      started: false,
      cancelled: false,
      promptBound: promptTokenBound(request),
      textBytes: 0,
      received: { bytes: 0, logprobs: 0 },
      channel: undefined!,
    };
    job.channel = new Channel<CompletionEvent>(() => this.cancel(job));
    signal?.addEventListener("abort", () => this.cancel(job), { once: true });
    return job;
  }

  /**
   * Runs a transcription somewhere in the fleet (see `./audio.ts`): its upload streams to the
   * agent from `request.spool` as it fills. Errors are thrown from the iterable as KilnErrors.
   */
  transcribe(request: AudioRequest, signal?: AbortSignal, traceId = ""): AsyncIterable<AudioEvent> {
    return this.audio.submit(request, signal, traceId);
  }

  /** Whether some connected agent transcribes with `model` (and every capability in `needs`). */
  transcribes(model: string, needs: readonly string[] = []): boolean {
    return this.audio.serves(model, needs);
  }

  /** The models the connected agents transcribe with (`whisper-1` among them when any does). */
  transcriptionModels(): string[] {
    return this.audio.models();
  }

  snapshot(): AgentSnapshot[] {
    return [...this.agents.values()].map((a) => ({
      nodeId: a.nodeId,
      hardware: a.register.hardware,
      draining: a.draining,
      connectedAt: a.connectedAt,
      ...(a.distrusted ? { distrusted: a.distrusted } : {}),
      observed: { ttftMs: a.speed.ttftMs(), tokensPerSecond: a.speed.tokensPerSecond(), inflight: a.jobs.size },
      pools: a.pools.map((p) => ({
        modelIds: [...p.modelIds],
        slots: p.slots,
        inflight: p.inflight,
        local: p.local,
        contextSize: p.contextSize,
        peakInflight: p.peak,
        capabilities: [...p.capabilities],
      })),
      placeable: a.placed.placeable,
      devices: a.placed.placeable ? a.placed.accounted() : [],
      replicas: [...a.placed.replicas].map(([model, r]): ReplicaSnapshot => {
        const pool = a.pools.find((p) => p.modelIds.has(model));
        return {
          model,
          state: r.state,
          progress: r.progress,
          bytes: [...r.bytes],
          inflight: pool?.inflight ?? 0,
          slots: pool?.slots ?? 0,
          lastUsedAt: r.lastUsedAt,
          pinned: this.pinned(a.nodeId, model),
        };
      }),
    }));
  }

  /** Requests waiting for a slot, all accounts together. */
  get queued(): number {
    return this.queuedJobs;
  }

  /** Reports clamped or refused so far, by node and kind (`kiln_node_reports_rejected_total`). */
  rejectedReports(): { node: string; kind: RejectedReport; count: number }[] {
    return [...this.rejectedCounts.values()].map((r) => ({ ...r }));
  }

  /**
   * Counts and logs a report of `nodeId` past a bound the scheduler computed (it was clamped, or the
   * message refused); a node that does it `distrustAfter` times within the window is drained: it
   * gets no more work, the operator is told (an error log line; the dashboard's node listing), and
   * a reconnect under its id stays drained until this scheduler restarts.
   */
  rejected(nodeId: string, kind: RejectedReport, detail: Record<string, unknown>, credential?: string): void {
    this.count(nodeId, kind, detail);
    this.strike(nodeId, kind, credential);
  }

  /** Why a node id, or a link's credential, may not register (drained for its reports), or undefined. */
  distrusted(nodeId: string, credential: string | undefined): Distrust | undefined {
    return this.distrust.get(`node:${nodeId}`) ?? (credential !== undefined ? this.distrust.get(`token:${credential}`) : undefined);
  }

  /** Drained nodes that are not connected (the dashboard lists them beside the connected ones). */
  drainedAway(): { nodeId: string; distrusted: Distrust; connectedAt: number }[] {
    return [...this.drainedNodes].filter(([id]) => !this.agents.has(id)).map(([nodeId, d]) => ({ nodeId, ...d }));
  }

  /** Counts and logs one count of a report past its bound. */
  private count(nodeId: string, kind: RejectedReport, detail: Record<string, unknown>): void {
    const node = this.rejectedCounts.has(`${nodeId}\0${kind}`) || this.rejectedCounts.size < MAX_REJECTED_SERIES ? nodeId : "(other)";
    const entry = this.rejectedCounts.get(`${node}\0${kind}`) ?? { node, kind, count: 0 };
    entry.count++;
    this.rejectedCounts.set(`${node}\0${kind}`, entry);
    this.log.warn({ node: nodeId, kind, ...detail }, "node report past the scheduler's bound: clamped");
  }

  /**
   * One report of `nodeId` went past a bound (`kind`: the last count of it that did), struck against
   * its id and its link's credential (`credential`, else its connected link's): at `distrustAfter`
   * within the window, under either, both are drained, and every connected node of either with them.
   */
  private strike(nodeId: string, kind: RejectedReport, credential = this.agents.get(nodeId)?.link.credential): void {
    const keys = [`node:${nodeId}`, ...(credential !== undefined ? [`token:${credential}`] : [])];
    if (this.distrusted(nodeId, credential)) return;
    const now = Date.now();
    const windowMs = this.options.distrustWindowMs ?? 10 * 60_000;
    let strikes = 0;
    for (const key of keys) {
      const times = [...(this.strikes.get(key) ?? []).filter((t) => t > now - windowMs), now];
      this.strikes.delete(key);
      remember(this.strikes, key, times);
      strikes = Math.max(strikes, times.length);
    }
    if (strikes < (this.options.distrustAfter ?? 3)) return;
    const reason = `${strikes} reports past the scheduler's bounds within ${Math.round(windowMs / 1000)} s (last: ${kind})`;
    const distrust = { reason, at: now };
    for (const key of keys) remember(this.distrust, key, distrust);
    for (const agent of this.agents.values()) {
      if (agent.nodeId !== nodeId && (credential === undefined || agent.link.credential !== credential)) continue;
      agent.distrusted = distrust;
      agent.draining = true;
      remember(this.drainedNodes, agent.nodeId, { distrusted: distrust, connectedAt: agent.connectedAt });
    }
    if (!this.drainedNodes.has(nodeId)) remember(this.drainedNodes, nodeId, { distrusted: distrust, connectedAt: now });
    this.log.error(
      { node: nodeId, reason },
      "node drained: it keeps reporting past the scheduler's bounds; it gets no more work until this scheduler restarts (its token may be revoked in --node-tokens)",
    );
  }

  // --- the agent side: the gRPC server calls these ------------------------------------------

  /**
   * Adds an agent after its Register message; returns the heartbeat interval to tell it. A node id
   * already connected is taken over only by a link with the same credential (the agent
   * reconnecting); any other is refused, and the connected agent stays untouched.
   */
  attach(register: Register__Output, link: AgentLink): { heartbeatMs: number } | { refused: string; distrusted?: true } {
    const distrust = this.distrusted(register.node_id, link.credential);
    if (distrust) {
      return {
        refused: `this node (id "${register.node_id}" or its node token) was drained for reports past the scheduler's bounds: ${distrust.reason}; it may not register until the scheduler restarts`,
        distrusted: true,
      };
    }
    const existing = this.agents.get(register.node_id);
    if (existing && existing.link.credential !== link.credential) {
      return { refused: `node id "${register.node_id}" is already connected with another node token` };
    }
    if (existing) {
      this.log.warn({ node: register.node_id }, "agent registered again; replacing its previous stream");
      this.detach(register.node_id, existing.link, "replaced by a new connection");
      existing.link.close("replaced by a new connection");
    }
    const pools = register.pools.map(poolOf);
    const agent = new Agent(register.node_id, link, register, pools);
    // replicas placed before this scheduler connected: ready ones serve, loading ones count
    for (const state of register.replicas) this.replicaState(agent, state);
    // its pins hold for the replicas it still has
    const pins = this.pins.get(register.node_id);
    for (const model of pins ?? []) if (!agent.placed.replicas.has(model)) pins!.delete(model);
    if (pins?.size === 0) this.pins.delete(register.node_id);
    this.agents.set(register.node_id, agent);
    this.log.info({ node: register.node_id, pools: register.pools.map((p) => ({ models: p.model_ids, slots: p.slots })), compute: register.hardware?.compute }, "agent joined");
    this.pump();
    return { heartbeatMs: this.options.heartbeatMs };
  }

  /** Handles one message from an attached agent. */
  receive(nodeId: string, link: AgentLink, message: AgentMessage__Output): void {
    const agent = this.agents.get(nodeId);
    if (!agent || agent.link !== link) return; // a replaced stream's stragglers
    agent.lastSeen = Date.now();
    switch (message.body) {
      case "chunk":
        this.text(agent, message.chunk!);
        return;
      case "chunks":
        for (const chunk of message.chunks!.chunks) this.text(agent, chunk);
        return;
      case "done": {
        const done = message.done!;
        this.settle(agent, done.request_id, "done", (pool, job) => {
          const used = this.bounded(agent, job, pool, done.usage);
          return {
            type: "done",
            finishReason: done.finish_reason,
            promptTokens: used.promptTokens,
            completionTokens: used.completionTokens,
            finishReasons: done.finish_reasons.length > 0 ? done.finish_reasons : [done.finish_reason],
            cachedTokens: used.cachedTokens,
            fingerprint: pool?.fingerprint ?? "",
            // a stop text is only ever one the request gave (what else a node names is dropped)
            ...(done.stop_text && job.request.sampling?.stop?.includes(done.stop_text) ? { stopText: done.stop_text } : {}),
          };
        });
        return;
      }
      case "embeddings": {
        const result = message.embeddings!;
        this.settle(agent, result.request_id, "embeddings", (pool, job) => ({
          type: "embeddings",
          vectors: result.vectors.map((v) => v.values),
          promptTokens: this.bounded(agent, job, pool, { prompt_tokens: result.prompt_tokens, completion_tokens: 0, cached_tokens: 0 }).promptTokens,
        }));
        return;
      }
      case "transcription_ack":
        this.audio.acked(agent, message.transcription_ack!.request_id, Number(message.transcription_ack!.stored_bytes));
        return;
      case "transcription_segments":
        this.audio.segments(agent, message.transcription_segments!);
        return;
      case "transcription_done":
        this.audio.done(agent, message.transcription_done!);
        return;
      case "error": {
        const err = message.error!;
        if (this.audio.owns(err.request_id)) return this.audio.error(agent, err);
        const pool = agent.jobs.get(err.request_id)?.assigned?.pool; // before finish() unassigns it
        const job = this.finish(agent, err.request_id);
        // a completion cancelled by its client is charged what it generated before it stopped
        if (job?.cancelled && err.usage) {
          const used = this.bounded(agent, job, pool, err.usage);
          tellUsage(job, used.promptTokens, used.completionTokens);
        }
        if (!job || job.cancelled) return;
        if (err.code === WIRE.nodeBusy && !job.started && ++job.busyRefusals <= MAX_BUSY_REFUSALS) {
          // the node's last slots went to another scheduler's work at the same moment (its heartbeat,
          // just before, says so): not a failure of the node, not an attempt; the job waits or goes elsewhere
          job.attempts--;
          job.queueDeadline ??= Date.now() + this.options.queueTimeoutMs;
          this.log.info({ request: job.id, node: nodeId }, "node busy with another scheduler's work; requeued");
          if (!this.dispatch(job)) this.enqueue(job, true);
          return;
        }
        if (err.retryable && !job.started) {
          job.failedOn.add(nodeId);
          this.retry(job, `${nodeId}: ${err.message}`);
        } else job.channel.fail(toClientError(err.code, err.message, job.started));
        return;
      }
      case "draining": {
        agent.draining = true;
        this.log.info({ node: nodeId, deadlineMs: message.draining!.deadline_ms }, "agent draining");
        return;
      }
      case "heartbeat": {
        // Slots the agent took for its own work count as busy; when some come back, waiting work may go.
        const beat = message.heartbeat;
        const local = beat?.local_busy_slots ?? [];
        let freed = false;
        agent.transcriptionJobs = beat?.transcription_jobs ?? 0;
        if (beat && agent.placed.placeable) agent.placed.updateDevices(beat.devices);
        // a placeable node's pools come and go: its heartbeat names each pool's first model, matched here by id
        const named = beat?.pool_models.length ? new Map(beat.pool_models.map((m, i) => [m, local[i] ?? 0])) : undefined;
        agent.pools.forEach((pool, i) => {
          const now = named ? (named.get(pool.modelIds.values().next().value!) ?? pool.local) : (local[i] ?? 0);
          if (now < pool.local) freed = true;
          pool.local = now;
        });
        if (freed) this.pump();
        return;
      }
      case "model_state":
        this.replicaState(agent, message.model_state!);
        return;
      case "register":
      default:
        return;
    }
  }

  /** Removes an agent whose stream ended; its unstarted requests move to other agents. */
  detach(nodeId: string, link: AgentLink, reason: string): void {
    const agent = this.agents.get(nodeId);
    if (!agent || agent.link !== link) return;
    this.agents.delete(nodeId);
    this.log.warn({ node: nodeId, reason, inflight: agent.jobs.size }, "agent left");
    for (const job of agent.jobs.values()) {
      job.assigned = undefined;
      if (job.cancelled) continue;
      if (job.started) job.channel.fail(new UpstreamError(WIRE.agentLost, `the node generating this completion (${nodeId}) went away: ${reason}`));
      else this.retry(job, `${nodeId} went away`);
    }
    agent.jobs.clear();
    for (const pool of agent.pools) this.prefixes.drop(pool);
    this.audio.lost(agent, reason);
    if (this.placer) {
      // what it held is placed again where there is demand for it, and min_replicas are kept
      this.placeWaiting();
      void this.placer.keepMinimums();
    }
  }

  close(): void {
    clearInterval(this.sweeper);
    const queued = [...this.queues.values()].flat();
    this.queues.clear();
    this.queuedJobs = 0;
    for (const job of queued) {
      clearTimeout(job.queuedTimer);
      job.channel.fail(new ServiceUnavailableError("shutting_down", "the scheduler is shutting down"));
    }
  }

  // --- placement ----------------------------------------------------------------------------

  /** A replica's state from its node: a ready one's pool joins the routing, a failed one is placed elsewhere. */
  private replicaState(agent: Agent, state: ModelState__Output): void {
    if (!agent.placed.placeable) return; // a node that said it takes no replicas has none
    const model = state.model_id;
    // a report of a model that is no catalog model, or that its token may not offer, is no replica (nothing kept of it)
    if (!this.options.placement?.model(model) || (agent.link.offers && !agent.link.offers(model))) return;
    const refused = state.state === "READY" ? this.poolRefusal(agent, state) : undefined;
    if (refused) {
      // once per replica (a node repeating it gets no second order), and that node is passed over for the model
      if (agent.placed.replicas.get(model)?.state === "unloading") return;
      this.log.warn({ node: agent.nodeId, model, why: refused }, "a replica's report refused; it is unloaded");
      this.orderUnload(agent, model);
      this.placer?.failed(agent.nodeId, model, refused);
      return;
    }
    const outcome = agent.placed.reported(state, Date.now());
    if (outcome === "ready") {
      // a READY told again (a second order for the replica) keeps the pool and the requests it counts
      if (!agent.pools.some((p) => p.modelIds.has(model))) {
        agent.pools.push(poolOf(state.pool!));
        this.log.info({ node: agent.nodeId, model, slots: state.pool!.slots }, "replica ready");
      }
      this.pump();
    } else if (outcome === "gone" || outcome === "failed") {
      this.dropPool(agent, model);
      this.dropPin(agent.nodeId, model);
      if (outcome === "failed") this.placer?.failed(agent.nodeId, model, state.reason.slice(0, 1000));
      this.placeWaiting(); // requests for it wait: placed again (elsewhere, after a failure)
    }
  }

  /** Replicas loading with no progress for LOAD_STALL_MS count as failed: unloaded, their node passed over for the model. */
  private dropStalledLoads(now: number): void {
    for (const a of this.agents.values()) {
      for (const [model, r] of a.placed.replicas) {
        if (r.state !== "loading" || now - r.progressAt < LOAD_STALL_MS) continue;
        this.log.warn({ node: a.nodeId, model }, "a replica made no progress loading; it is unloaded and placed elsewhere");
        this.orderUnload(a, model);
        this.placer?.failed(a.nodeId, model, "no progress loading");
      }
    }
  }

  /** Why a READY report cannot be taken (its pool past the node token's bounds, or not the model's), or undefined. */
  private poolRefusal(agent: Agent, state: ModelState__Output): string | undefined {
    const pool = state.pool;
    if (!pool) return "READY without its pool";
    if (pool.model_ids.length !== 1 || pool.model_ids[0] !== state.model_id) return "its pool does not serve exactly the model placed";
    if (!this.options.placement?.model(state.model_id)) return "not a model of the catalog";
    if (agent.link.offers && !agent.link.offers(state.model_id)) return "its node token may not offer this model";
    if (pool.context_size > MAX_CONTEXT_SIZE) return `a context of ${pool.context_size} tokens; at most ${MAX_CONTEXT_SIZE}`;
    const others = agent.pools.filter((p) => !p.modelIds.has(state.model_id)).reduce((n, p) => n + p.slots, 0);
    const most = agent.link.maxSlots ?? Infinity;
    if (pool.slots < 1 || others + pool.slots > most) return `${others + pool.slots} slots in all; its node token allows at most ${most}`;
    // the replica is what was ordered: the catalog's sequences, and no more context than the catalog's
    const entry = this.options.placement.model(state.model_id)!;
    if (pool.slots !== entry.sequences) return `${pool.slots} slots; the catalog's entry has ${entry.sequences} sequences`;
    if (pool.context_size > entry.contextSize) return `a context of ${pool.context_size} tokens; the catalog's entry has ${entry.contextSize}`;
    return undefined;
  }

  /**
   * Orders `agent` to unload its replica of `model`: the replica counts as unloading from now, and
   * its pool takes no new request (those it runs finish on the node).
   */
  private orderUnload(agent: Agent, model: string): void {
    agent.placed.unloading(model);
    this.dropPool(agent, model);
    agent.link.send({ unload_model: { model_id: model } });
  }

  /** Removes the pool serving `model` from `agent` (its running requests finish on the node; their slots are no longer counted). */
  private dropPool(agent: Agent, model: string): void {
    const i = agent.pools.findIndex((p) => p.modelIds.has(model));
    if (i >= 0) this.prefixes.drop(agent.pools.splice(i, 1)[0]!);
  }

  /**
   * Catalog models with requests waiting: one with no replica ready or loading gets one; one whose
   * waiting requests outnumber its replicas' slots gets another, up to its max_replicas.
   */
  private placeWaiting(): void {
    if (!this.placer || this.queuedJobs === 0) return;
    const waiting = new Map<string, number>();
    for (const queue of this.queues.values()) for (const job of queue) waiting.set(job.request.model, (waiting.get(job.request.model) ?? 0) + slotsOf(job));
    for (const [model, count] of waiting) {
      if (!this.options.placement!.model(model)) continue;
      let slots = 0;
      for (const a of this.agents.values()) if (!a.draining) for (const p of a.pools) if (p.modelIds.has(model)) slots += p.slots;
      const replicas = this.placer.replicas(model);
      const wanted = replicas === 0 ? 1 : count > slots && slots > 0 ? replicas + 1 : replicas;
      if (wanted > replicas) this.placer.ensure(model, wanted).catch((err: unknown) => this.failWaiting(model, err));
    }
  }

  /** One placeable node as placement sees it: a replica pinned, or idle for less than its idle_unload_s, is kept. */
  private placementNode(a: Agent, now: number): PlacementNode {
    const inflight = (model: string) => a.pools.find((p) => p.modelIds.has(model))?.inflight ?? 0;
    const keep = (model: string, idleMs: number) => this.pinned(a.nodeId, model) || idleMs < (this.options.placement?.model(model)?.idleUnloadS ?? 0) * 1000;
    // a model its node token may not offer, or whose slots would take the node past its token's, is not placed there
    const accepts = (model: string) => {
      if (a.link.offers && !a.link.offers(model)) return false;
      const others = a.pools.filter((p) => !p.modelIds.has(model)).reduce((n, p) => n + p.slots, 0);
      return others + (this.options.placement?.model(model)?.sequences ?? 0) <= (a.link.maxSlots ?? Infinity);
    };
    return { ...a.placed.placementNode(a.nodeId, !a.draining && !a.distrusted, inflight, keep, now), accepts };
  }

  /** The registry as placement sees it (scheduler/placement). */
  private placementView(): PlacementView {
    return {
      nodes: () => {
        const now = Date.now();
        const nodes = [];
        // a draining node's replicas are on their way out: they count for nothing, and its models are placed elsewhere
        for (const a of this.agents.values()) if (a.placed.placeable && !a.draining) nodes.push(this.placementNode(a, now));
        return nodes;
      },
      load: (node, order) => {
        const agent = this.agents.get(node);
        if (!agent) return;
        agent.placed.ordered(order.model.id, order.split, Date.now());
        agent.link.send({
          load_model: {
            model_id: order.model.id,
            source: order.model.source,
            context_size: order.model.contextSize,
            sequences: order.model.sequences,
            device_bytes: order.split,
            speculative: order.model.speculative ?? "",
          },
        });
      },
      unload: (node, model) => {
        const agent = this.agents.get(node);
        if (agent) this.orderUnload(agent, model);
      },
    };
  }

  /**
   * A model's state for /v1/models (shape B): `available` (a replica is ready), `loading`,
   * `placeable` (none loaded, a node has room), `too_large` (no node could ever hold it), or
   * `unavailable` (no node serves it, and without a catalog entry or room none will).
   */
  statusOf(model: string): PlacementStatus {
    if (this.serves(model)) return "available";
    if (!this.placer || !this.options.placement?.model(model)) return "unavailable";
    for (const a of this.agents.values()) if (a.placed.replicas.get(model)?.state === "loading") return "loading";
    return this.placer.statusNow(model);
  }

  /** How far the furthest loading replica of `model` is (0–1), or undefined when none loads. */
  progressOf(model: string): number | undefined {
    let most: number | undefined;
    for (const a of this.agents.values()) {
      const r = a.placed.replicas.get(model);
      if (r?.state === "loading") most = Math.max(most ?? 0, r.progress);
    }
    return most;
  }

  // --- the operator's actions (the dashboard's fleet page) -----------------------------------

  /** Whether the operator pinned `model`'s replica on `nodeId` (on this scheduler). */
  pinned(nodeId: string, model: string): boolean {
    return this.pins.get(nodeId)?.has(model) ?? false;
  }

  private dropPin(nodeId: string, model: string): boolean {
    const pins = this.pins.get(nodeId);
    if (!pins?.delete(model)) return false;
    if (pins.size === 0) this.pins.delete(nodeId);
    return true;
  }

  /**
   * Pins a replica of the catalog model `model` (its canonical id) to `nodeId`: placement never unloads
   * it to make room. A node that holds none gets one loaded, when the plan fits it on that node (the
   * node's idle, unpinned replicas it names are unloaded first), within the model's max_replicas.
   * Answers the replica's state, whether a load was ordered, and what was unloaded for it. Refusals:
   * 404 `node_not_found`, 400 `model_not_found`, 409 `placement_refused` (naming what is missing) or
   * `replica_busy` (a replica being unloaded).
   */
  async pin(nodeId: string, model: string): Promise<{ state: "loading" | "ready"; loaded: boolean; evicted: string[] }> {
    const placed = this.catalogModel(model);
    const held = this.pinHeld(nodeId, model);
    if (held) return held;
    this.refusePlacing(this.connected(nodeId), placed);
    let bytes: number;
    try {
      bytes = await this.options.placement!.size(placed);
    } catch (err) {
      throw new ServiceUnavailableError("model_unavailable", `model: the memory a replica of "${model}" needs could not be read: ${(err as Error).message}`);
    }
    // the fleet may have changed while the model was sized: every check again
    return this.pinHeld(nodeId, model) ?? this.placePinned(this.connected(nodeId), placed, bytes);
  }

  /** The pin of a replica `nodeId` holds already, or undefined when it holds none. */
  private pinHeld(nodeId: string, model: string): { state: "loading" | "ready"; loaded: boolean; evicted: string[] } | undefined {
    const replica = this.connected(nodeId).placed.replicas.get(model);
    if (!replica) return undefined;
    if (replica.state === "unloading")
      throw new ConflictError("replica_busy", `model: the replica of "${model}" on node "${nodeId}" is being unloaded; pin it again once it is gone, to have it loaded again`);
    let pins = this.pins.get(nodeId);
    if (!pins) this.pins.set(nodeId, (pins = new Set()));
    pins.add(model);
    this.log.info({ node: nodeId, model }, "replica pinned by the operator");
    return { state: replica.state, loaded: false, evicted: [] };
  }

  /** Refuses (409 placement_refused) a new replica of `model` on a node that takes none now, or past the model's max_replicas. */
  private refusePlacing(agent: Agent, model: PlacedModel): void {
    const node = agent.nodeId;
    if (!agent.placed.placeable) throw new ConflictError("placement_refused", `node: "${node}" serves its --serve list and takes no placed replicas`);
    if (agent.distrusted) throw new ConflictError("placement_refused", `node: "${node}" was drained for reports past the scheduler's bounds and takes no replicas`);
    if (agent.draining) throw new ConflictError("placement_refused", `node: "${node}" is draining and takes no new replicas`);
    const count = this.placer!.replicas(model.id);
    if (count >= model.maxReplicas) {
      const where = [...this.agents.values()].filter((a) => {
        const r = a.placed.replicas.get(model.id);
        return r !== undefined && r.state !== "unloading";
      });
      throw new ConflictError(
        "placement_refused",
        `model: "${model.id}" has its max_replicas (${model.maxReplicas}) already, on ${where.map((a) => `"${a.nodeId}"`).join(", ")}; unload one first, or raise max_replicas in the catalog`,
      );
    }
  }

  /** Orders a pinned replica of `model` loaded on `agent` when the plan, over that node alone, fits it there. */
  private placePinned(agent: Agent, model: PlacedModel, bytes: number): { state: "loading"; loaded: true; evicted: string[] } {
    this.refusePlacing(agent, model);
    const node = this.placementNode(agent, Date.now());
    const rules = { replicasOf: (m: string) => this.placer!.replicas(m), minReplicasOf: (m: string) => this.options.placement!.model(m)?.minReplicas ?? 0 };
    const plan = choosePlacement({ model: model.id, bytes }, [node], rules);
    if (plan.kind === "too_large") {
      const total = node.devices.reduce((n, d) => n + d.totalBytes, 0);
      throw new ConflictError("placement_refused", `node: "${agent.nodeId}" offers ${formatMemory(total)} in all, and a replica of "${model.id}" needs ${formatMemory(bytes)}`);
    }
    if (plan.kind === "no_room") {
      const free = node.devices.reduce((n, d) => n + d.freeBytes, 0);
      const kept = node.replicas.map((r) => `${r.model} (${this.whyKept(agent, r, rules)})`);
      throw new ConflictError(
        "placement_refused",
        `node: "${agent.nodeId}" has ${formatMemory(free)} free, and a replica of "${model.id}" needs ${formatMemory(bytes)}; ${kept.length ? `what it holds cannot make room: ${kept.join(", ")}` : "it holds no replica to unload"}`,
      );
    }
    let pins = this.pins.get(agent.nodeId);
    if (!pins) this.pins.set(agent.nodeId, (pins = new Set()));
    pins.add(model.id);
    for (const evicted of plan.evict) this.view.unload(agent.nodeId, evicted);
    this.view.load(agent.nodeId, { model, split: plan.split });
    this.log.info({ node: agent.nodeId, model: model.id, split: plan.split, evict: plan.evict }, "replica pinned by the operator: loading");
    return { state: "loading", loaded: true, evicted: plan.evict };
  }

  /** Why a replica stays where a pinned load found no room (for the refusal's message). */
  private whyKept(agent: Agent, r: PlacementNode["replicas"][number], rules: { replicasOf(m: string): number; minReplicasOf(m: string): number }): string {
    if (this.pinned(agent.nodeId, r.model)) return "pinned";
    if (r.state !== "ready") return r.state === "unloading" ? "being unloaded" : "loading";
    if (r.inflight > 0) return `answering ${r.inflight} request${r.inflight === 1 ? "" : "s"}`;
    if (r.keep) return `idle for less than its idle_unload_s (${this.options.placement?.model(r.model)?.idleUnloadS ?? 0} s)`;
    if (rules.replicasOf(r.model) <= rules.minReplicasOf(r.model)) return `kept for its min_replicas (${rules.minReplicasOf(r.model)})`;
    return "idle";
  }

  /** Removes the operator's pin of `model` on `nodeId`: placement may unload the replica again. 404 when there is none. */
  unpin(nodeId: string, model: string): void {
    if (this.dropPin(nodeId, model)) {
      this.log.info({ node: nodeId, model }, "replica unpinned by the operator");
      return;
    }
    if (!this.agents.has(nodeId)) throw this.noNode(nodeId);
    this.catalogModel(model);
    throw new NotFoundError("replica_not_found", `model: "${model}" is not pinned on node "${nodeId}"`);
  }

  /**
   * Unloads the replica of `model` on `nodeId` (UnloadModel): it takes no new request at once, and its
   * node lets the requests it answers finish (stopping them after a minute's grace), then frees it.
   * One that answers requests is refused (409
   * `replica_busy`) unless `force`. Its pin goes with it. Answers whether it was pinned, and the
   * requests it was answering.
   */
  unloadReplica(nodeId: string, model: string, force: boolean): { unpinned: boolean; inflight: number } {
    const agent = this.connected(nodeId);
    const replica = agent.placed.replicas.get(model);
    if (!replica) {
      this.catalogModel(model);
      throw new NotFoundError("replica_not_found", `model: node "${nodeId}" holds no replica of "${model}"`);
    }
    const inflight = agent.pools.find((p) => p.modelIds.has(model))?.inflight ?? 0;
    if (inflight > 0 && !force) {
      throw new ConflictError(
        "replica_busy",
        `model: the replica of "${model}" on node "${nodeId}" answers ${inflight} request${inflight === 1 ? "" : "s"} now; unload it with force: true (it takes no new request; its node lets those finish, stopping them after a minute, then frees it)`,
      );
    }
    const unpinned = this.dropPin(nodeId, model);
    if (replica.state !== "unloading") {
      this.view.unload(nodeId, model); // its pool leaves the routing there
      this.log.info({ node: nodeId, model, inflight, force }, "replica unloaded by the operator");
      this.placeWaiting(); // requests waiting for it go to a replica elsewhere
    }
    return { unpinned, inflight };
  }

  /**
   * Drains a node as the operator asks (the dashboard): it gets no new work from this scheduler at
   * once, and is sent Drain: its link to this scheduler lets the requests it runs finish (within
   * `deadlineMs`), then closes, and the agent does not dial this scheduler again until it restarts.
   * Answers false when it was drained so already.
   */
  drainNode(nodeId: string, deadlineMs: number): boolean {
    const agent = this.connected(nodeId);
    if (agent.drainOrdered) return false;
    agent.drainOrdered = true;
    agent.draining = true;
    agent.link.send({ drain: { deadline_ms: deadlineMs } });
    this.log.info({ node: nodeId, deadlineMs }, "node drained by the operator");
    this.placeWaiting();
    return true;
  }

  /** The connected agent `nodeId` names, or 404 node_not_found. */
  private connected(nodeId: string): Agent {
    const agent = this.agents.get(nodeId);
    if (!agent) throw this.noNode(nodeId);
    return agent;
  }

  private noNode(nodeId: string): NotFoundError {
    return new NotFoundError("node_not_found", `node: no node "${nodeId.slice(0, 128)}" is connected to this scheduler`);
  }

  /** The catalog model `id` (canonical) names, or 400 model_not_found. */
  private catalogModel(id: string): PlacedModel {
    const model = this.options.placement?.model(id);
    if (!model) throw new InvalidRequestError("model_not_found", `model: "${id.slice(0, 128)}" is not a model of the operator's catalog`, "model");
    return model;
  }

  // --- routing ------------------------------------------------------------------------------

  /** `account`'s cache scope (`cacheScope`), remembered. */
  private scopeOf(account: string): string {
    let scope = this.scopes.get(account);
    if (scope === undefined) rememberAtMost(this.scopes, account, (scope = cacheScope(this.scopeKey, account)), MAX_REMEMBERED_SCOPES);
    return scope;
  }

  /**
   * Sends the job to the pool with a free slot that costs least (`routingCost`); false when there is
   * none. Nodes the job already failed on are passed over while another node serves its model (it
   * then waits for that node rather than going back).
   */
  private dispatch(job: Job): boolean {
    let best: { agent: Agent; pool: PoolState & { peak: number } } | undefined;
    let bestLoad = Infinity;
    const scope = (job.scope ??= this.scopeOf(job.request.account ?? ""));
    const prefix = (job.prefix ??= prefixOf(job.request, scope));
    // with a prefix to route by: every pool that could take the job, and its load
    const open = prefix ? new Map<PoolState, { agent: Agent; pool: PoolState & { peak: number }; load: number }>() : undefined;
    const serves = (agent: Agent) => !agent.draining && agent.pools.some((p) => runs(p, job.request.model, job.needs));
    const avoid = job.failedOn.size > 0 && [...this.agents.values()].some((a) => !job.failedOn.has(a.nodeId) && serves(a));
    const quickest = fastest([...this.agents.values()].filter(serves).map((a) => a.speed));
    for (const agent of this.agents.values()) {
      if (agent.draining || (avoid && job.failedOn.has(agent.nodeId))) continue;
      for (const pool of agent.pools) {
        if (!runs(pool, job.request.model, job.needs) || pool.inflight + pool.local + slotsOf(job) > pool.slots) continue;
        const load = routingCost(pool, slowness(agent.speed, quickest)) + agent.jobs.size * 1e-6; // tie-break: fewer requests overall
        open?.set(pool, { agent, pool, load });
        if (load < bestLoad) {
          best = { agent, pool };
          bestLoad = load;
        }
      }
    }
    if (!best) return false;
    if (prefix && open) {
      // the pool holding the longest prefix of the conversation, unless it is busier than the least loaded by more than the margin
      const held = this.prefixes.longest(prefix.chain, (pool) => open.has(pool));
      // a short prefix is cheaper to evaluate again than to wait behind a busier node for
      const worth = held !== undefined && prefix.bytes[held.length - 1]! >= PREFIX_MIN_BYTES;
      const holder = worth ? held.pools.map((p) => open.get(p)!).reduce((a, b) => (b.load < a.load ? b : a)) : undefined;
      if (holder && holder.load <= bestLoad + PREFIX_MARGIN) best = holder;
      this.prefixes.record(best.pool, best.pool.slots, prefix.chain);
      prefix.reply = new MessageHash(prefix.chain[prefix.chain.length - 1]!, "assistant");
    }
    const { agent, pool } = best;
    pool.inflight += slotsOf(job);
    pool.peak = Math.max(pool.peak, pool.inflight);
    agent.jobs.set(job.id, job);
    job.assigned = best;
    job.attempts++;
    job.dispatchedAt = performance.now();
    job.firstTextAt = undefined;
    job.textBytes = 0;
    job.received = { bytes: 0, logprobs: 0 };
    const r = job.request;
    this.served(r.account ?? "");
    agent.placed.used(r.model, Date.now());
    if (r.embed) {
      agent.link.send({
        embedding: { request_id: job.id, trace_id: job.traceId, model: r.model, inputs: r.embed.inputs, ...(r.embed.dimensions ? { dimensions: r.embed.dimensions } : {}) },
      });
      return true;
    }
    agent.link.send({
      completion: {
        request_id: job.id,
        trace_id: job.traceId,
        model: r.model,
        messages: messagesToProto(r.messages),
        ...toolsToProto(r),
        ...(r.maxTokens !== undefined ? { max_tokens: r.maxTokens } : {}),
        ...(r.temperature !== undefined ? { temperature: r.temperature } : {}),
        ...samplingToProto(r.sampling),
        ...responseFormatToProto(r.responseFormat),
        ...(r.logprobs !== undefined ? { logprobs: true, top_logprobs: r.logprobs } : {}),
        ...(r.prompt !== undefined ? { prompt: r.prompt } : {}),
        ...(r.n !== undefined && r.n > 1 ? { n: r.n } : {}),
        cache_scope: scope,
      },
    });
    return true;
  }

  /** Puts the job at the tail of its account's queue (a retry: at the head), unless the queues are full. */
  private enqueue(job: Job, atHead = false): void {
    const account = job.request.account ?? "";
    if (this.queuedJobs >= this.options.queueSize && !this.makeRoomFor(account)) {
      job.channel.fail(new ServiceUnavailableError("queue_full", `model: every slot serving "${job.request.model}" is busy and the wait queue is full; retry later`));
      return;
    }
    job.queuedTimer = setTimeout(
      () => {
        this.unqueue(job);
        job.channel.fail(
          new ServiceUnavailableError("queue_timeout", `model: no slot serving "${job.request.model}" came free within ${Math.round(this.options.queueTimeoutMs / 1000)} s`),
        );
      },
      job.queueDeadline !== undefined ? Math.max(0, job.queueDeadline - Date.now()) : this.options.queueTimeoutMs,
    );
    let queue = this.queues.get(account);
    if (!queue) this.queues.set(account, (queue = []));
    if (atHead) queue.unshift(job);
    else queue.push(job);
    this.queuedJobs++;
  }

  /**
   * A full queue makes room for `account` when another account holds more than one place more than
   * it does: that account's newest waiting request is refused (503 queue_full), so one account's
   * flood cannot keep every other account out of the queue.
   */
  private makeRoomFor(account: string): boolean {
    const own = this.queues.get(account)?.length ?? 0;
    let largest: [string, Job[]] | undefined;
    for (const entry of this.queues) if (!largest || entry[1].length > largest[1].length) largest = entry;
    if (!largest || largest[0] === account || largest[1].length <= own + 1) return false;
    const [victimAccount, queue] = largest;
    const victim = queue[queue.length - 1]!;
    this.take(victimAccount, queue, queue.length - 1);
    victim.channel.fail(new ServiceUnavailableError("queue_full", `model: the wait queue is full and this account holds more of it than any other; retry later`));
    return true;
  }

  private unqueue(job: Job): boolean {
    const account = job.request.account ?? "";
    const queue = this.queues.get(account);
    const i = queue ? queue.indexOf(job) : -1;
    if (i < 0) return false;
    this.take(account, queue!, i);
    return true;
  }

  /** Removes the `i`th job of `account`'s queue (and the queue once empty) and stops its timer. */
  private take(account: string, queue: Job[], i: number): void {
    const [job] = queue.splice(i, 1);
    if (!queue.length) this.queues.delete(account);
    this.queuedJobs--;
    clearTimeout(job!.queuedTimer);
  }

  /**
   * Dispatches queued jobs while slots are free, round-robin across accounts: each one goes to the
   * least recently served account (never served first, then by first wait) that has a job a free
   * slot can take, and is that account's oldest such job (one waiting for a busy model holds up
   * no other).
   */
  private pump(): void {
    while (this.queuedJobs > 0) {
      const accounts = [...this.queues.keys()].sort((a, b) => (this.lastServed.get(a) ?? 0) - (this.lastServed.get(b) ?? 0));
      // A job for n choices that does not fit yet reserves its model's freed slots: without that,
      // single-slot jobs would take each one as it came free, and it would wait until it timed out.
      const reserved = new Set<string>();
      let dispatched = false;
      for (const account of accounts) {
        const queue = this.queues.get(account)!;
        const i = queue.findIndex((job) => {
          if (reserved.has(job.request.model)) return false;
          if (this.dispatch(job)) return true;
          if (slotsOf(job) > 1) reserved.add(job.request.model);
          return false;
        });
        if (i < 0) continue;
        this.take(account, queue, i);
        dispatched = true;
        break;
      }
      if (!dispatched) return this.placeWaiting();
    }
  }

  /** Marks `account` as served now: it goes to the back of the round-robin. */
  private served(account: string): void {
    this.lastServed.delete(account);
    rememberAtMost(this.lastServed, account, ++this.tick, SERVED_ACCOUNTS);
  }

  private retry(job: Job, why: string): void {
    if (job.attempts >= this.maxAttempts) {
      job.channel.fail(new UpstreamError("agents_failed", `the request failed on ${job.attempts} nodes; last: ${why}`));
      return;
    }
    this.log.info({ request: job.id, attempt: job.attempts, why }, "retrying completion on another agent");
    if (!this.dispatch(job)) this.enqueue(job, true);
  }

  /** A piece of a completion's text, passed on to its client. */
  private text(agent: Agent, chunk: CompletionChunk__Output): void {
    const job = agent.jobs.get(chunk.request_id);
    if (!job || job.cancelled || (!chunk.text && chunk.tool_calls.length === 0)) return;
    job.firstTextAt ??= performance.now(); // its TTFT counts once it completes (settle): a byte sent at once and no end proves nothing
    const textBytes = Buffer.byteLength(chunk.text) + chunk.tool_calls.reduce((n, d) => n + Buffer.byteLength(d.name) + Buffer.byteLength(d.arguments), 0);
    job.textBytes += textBytes;
    job.received.bytes += textBytes;
    if (job.request.logprobs !== undefined)
      for (const l of chunk.logprobs) {
        job.received.logprobs += 1 + l.top_logprobs.length;
        job.received.bytes += Buffer.byteLength(l.token) + l.raw.length + l.top_logprobs.reduce((n, t) => n + Buffer.byteLength(t.token) + t.raw.length, 0);
      }
    const bound = completionReceiveBound(job.request, job.assigned?.pool.contextSize ?? 0);
    if (job.received.bytes > bound.bytes || job.received.logprobs > bound.logprobs) return this.overrun(agent, job, bound);
    job.started = true;
    const reply = job.prefix?.reply;
    if (reply) {
      reply.text(chunk.text);
      for (const d of chunk.tool_calls) (d.name ? reply.call(d.name) : reply).text(d.arguments);
    }
    job.channel.push({
      type: "text",
      text: chunk.text,
      index: chunk.index,
      ...(job.request.logprobs !== undefined ? { logprobs: chunk.logprobs } : {}),
      ...(chunk.tool_calls.length > 0 && job.request.tools?.length
        ? { toolCalls: chunk.tool_calls.map((d) => ({ index: d.index, ...(d.name ? { name: d.name } : {}), arguments: d.arguments })) }
        : {}),
    });
  }

  /**
   * A node sent more for `job` than it can produce (`completionReceiveBound`): the job is cancelled on
   * the node and its slot freed, its client gets an error, and the node is counted and struck.
   */
  private overrun(agent: Agent, job: Job, bound: { bytes: number; logprobs: number }): void {
    this.finish(agent, job.id);
    job.cancelled = true;
    agent.link.send({ cancel: { request_id: job.id } });
    job.channel.fail(
      new UpstreamError(
        WIRE.agentError,
        `the node (${agent.nodeId}) sent more for this completion than it can hold (over ${bound.bytes} bytes or ${bound.logprobs} log-probability entries for its token bound); it was stopped`,
      ),
    );
    this.rejected(agent.nodeId, "completion_text", { request: job.id, bytes: job.received.bytes, logprobs: job.received.logprobs, bound });
  }

  /**
   * Ends a job with its last event (`last` is given the pool it ran on), its slots freed first. The
   * last event must be the one the request asked for (`done` for a completion, `embeddings` for
   * embeddings): another fails the request with `agent_error`, cancels it on the node and counts a
   * strike (`answer_kind`), since the request's route would end without an answer.
   */
  private settle(agent: Agent, requestId: string, kind: "done" | "embeddings", last: (pool: PoolState | undefined, job: Job) => CompletionEvent): void {
    const pool = agent.jobs.get(requestId)?.assigned?.pool; // before finish() unassigns it
    const job = this.finish(agent, requestId);
    if (!job) return;
    const asked = job.request.embed ? "embeddings" : "done";
    if (kind !== asked) {
      job.cancelled = true;
      agent.link.send({ cancel: { request_id: job.id } });
      job.channel.fail(
        new UpstreamError(
          WIRE.agentError,
          `the node (${agent.nodeId}) answered ${asked === "done" ? "a completion" : "an embeddings request"} with ${kind === "done" ? "a completion's end" : "embeddings"}`,
        ),
      );
      this.rejected(agent.nodeId, "answer_kind", { request: job.id, asked, answered: kind });
      return;
    }
    const event = last(pool, job);
    // the slot now holds the reply too: the conversation's next turn sends it back as its last assistant message
    if (event.type === "done" && pool && job.prefix?.reply) this.prefixes.extend(pool, job.prefix.chain, job.prefix.reply.end());
    if (event.type === "done" && job.firstTextAt !== undefined) {
      if (job.dispatchedAt !== undefined) agent.speed.firstText(job.firstTextAt - job.dispatchedAt);
      // tokens/s as observed: a token is at least a byte of the text the node sent
      const seconds = (performance.now() - job.firstTextAt) / 1000;
      if (seconds > 0) agent.speed.generated(Math.min(event.completionTokens, job.textBytes) / seconds);
    }
    // answered: charged whether or not its client is still there to read it
    if (event.type === "done") tellUsage(job, event.promptTokens, event.completionTokens);
    else if (event.type === "embeddings") tellUsage(job, event.promptTokens, 0);
    if (job.cancelled) return;
    job.started = true;
    job.channel.push(event);
    job.channel.end();
  }

  /**
   * The usage a node reported for `job`, each count clamped to the bound the scheduler computes from
   * the request itself (limits.ts): prompt tokens to the prompt's bytes and template overhead,
   * completion tokens to max_tokens (or the pool's context) per choice, cached tokens to the prompt's.
   * Each count past its bound is counted and logged (`rejected`).
   */
  private bounded(
    agent: Agent,
    job: Job,
    pool: PoolState | undefined,
    usage: { prompt_tokens: number; completion_tokens: number; cached_tokens: number } | null | undefined,
  ): { promptTokens: number; completionTokens: number; cachedTokens: number } {
    let past: RejectedReport | undefined;
    const clamp = (kind: RejectedReport, claimed: number, bound: number): number => {
      if (claimed <= bound) return claimed;
      this.count(agent.nodeId, kind, { request: job.id, claimed, bound });
      past = kind;
      return bound;
    };
    const promptTokens = clamp("prompt_tokens", usage?.prompt_tokens ?? 0, job.promptBound);
    const completionTokens = clamp("completion_tokens", usage?.completion_tokens ?? 0, completionTokenBound(job.request, pool?.contextSize ?? 0));
    const cachedTokens = clamp("cached_tokens", usage?.cached_tokens ?? 0, promptTokens);
    if (past) this.strike(agent.nodeId, past); // one report, one strike, however many of its counts were past
    return { promptTokens, completionTokens, cachedTokens };
  }

  /** Releases the job's slot; the freed capacity goes to the queue. */
  private finish(agent: Agent, requestId: string): Job | undefined {
    const job = agent.jobs.get(requestId);
    if (!job) return undefined;
    agent.jobs.delete(requestId);
    if (job.assigned) job.assigned.pool.inflight -= slotsOf(job);
    job.assigned = undefined;
    this.pump();
    return job;
  }

  private cancel(job: Job): void {
    const finished = job.channel.closed && !job.assigned;
    if (job.cancelled || finished) return;
    job.cancelled = true;
    if (this.unqueue(job)) return;
    // The slot stays held until the agent confirms (its error "cancelled" releases it).
    job.assigned?.agent.link.send({ cancel: { request_id: job.id } });
  }

  private dropSilentAgents(): void {
    const limit = Date.now() - 3 * this.options.heartbeatMs;
    for (const agent of [...this.agents.values()]) {
      if (agent.lastSeen < limit) {
        this.detach(agent.nodeId, agent.link, "no heartbeat for 3 intervals");
        agent.link.close("no heartbeat");
      }
    }
  }
}

/**
 * How much busier (in routing cost: a pool's share of busy slots, times its slowness) the pool holding
 * a conversation's longest prefix may be than the least loaded one and still get its next turn: half
 * of its slots. Past it, the prompt is evaluated again elsewhere rather than waiting behind a busy node.
 */
export const PREFIX_MARGIN = 0.5;

/** The shortest conversation prefix (bytes of its messages' text, about 128 tokens) worth routing a request to the node holding it. */
export const PREFIX_MIN_BYTES = 512;

/** A chat request's prefix chain for routing; null when it is not routed by prefix (a raw prompt, embeddings, several choices). */
function prefixOf(r: CompletionRequest, scope: string): NonNullable<Job["prefix"]> | null {
  if (r.embed || r.prompt !== undefined || (r.n ?? 1) > 1 || r.messages.length === 0) return null;
  return { chain: prefixChain(scope, r.tools, r.messages), bytes: prefixBytes(r.messages) };
}

/**
 * What a pool costs a job: (1 + the share of its claimed slots in use) × how much slower than the
 * fastest candidate the scheduler observed its node to be (speed.ts `slowness`), less 1. Among
 * nodes the scheduler saw answer alike (slowness 1) the least-loaded share wins, as by slots alone;
 * a node twice as slow gets work only once the fast ones are full, one half again as slow once they
 * are half full. A node that claims slots it cannot run slows down as they fill, and so draws less.
 */
export function routingCost(pool: Pick<PoolState, "inflight" | "local" | "slots">, slow: number): number {
  return (1 + (pool.inflight + pool.local) / pool.slots) * slow - 1;
}

/** Maps an agent's error code to what the client sees. */
function toClientError(code: string, message: string, started: boolean): ApiError {
  // the agent's message starts with the field at fault ("input[2]: …"), which becomes the error's param
  if (CHAT_CLIENT_FAULTS.has(code) && !started) return new InvalidRequestError(relayedCode(code), message);
  return new UpstreamError(relayedCode(code) || WIRE.agentError, message);
}

/** `request` without the stop texts it would have its node name (`nameStop`): for nodes that cannot. */
function withoutNamedStops(request: CompletionRequest): CompletionRequest {
  const { nameStop: _nameStop, sampling, ...rest } = request;
  const { stop: _stop, ...kept } = sampling ?? {};
  return Object.keys(kept).length > 0 ? { ...rest, sampling: kept } : rest;
}

/**
 * The scheduler's side of placement: when a request names a catalog model no node has ready, or its
 * queue outgrows its replicas, or it has fewer than its `min_replicas`, the placer sizes the model
 * (estimate.ts), chooses a node (plan.ts) and orders the load, unloading the idle replicas the plan
 * names first. It keeps no replica state of its own: what the nodes report (through `PlacementView`,
 * the fleet's registry) is the truth, a replica the placer ordered counts as `loading` there at once.
 *
 * Several schedulers: each asks `claims` before ordering a load (a database row per model and
 * moment), so two schedulers that see the same cold model at once order one load; the other sees the
 * replica the agent reports to every scheduler it serves.
 */
import { formatMemory } from "../../core/bytes.js";
import { ServiceUnavailableError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { choosePlacement, type PlacementNode } from "./plan.js";

/** A catalog model as placement reads it. */
export interface PlacedModel {
  id: string;
  /** `hf:…` reference or a path on the nodes. */
  source: string;
  contextSize: number;
  sequences: number;
  minReplicas: number;
  maxReplicas: number;
  /** A replica idle this long may be unloaded to make room. */
  idleUnloadS: number;
  /** Replaces the estimate. */
  memoryBytes?: number;
  /** Speculative decoding on its replicas, as the catalog writes it (`lookup`, `draft:<source>`); none when unset. */
  speculative?: string;
}

/** What the placer orders a node to do. */
export interface LoadOrder {
  model: PlacedModel;
  /** Bytes per device (the split). */
  split: number[];
}

/** The fleet's registry as the placer sees it. */
export interface PlacementView {
  /** Every node that offers its devices, with its replicas (those ordered and not yet reported included). */
  nodes(): Iterable<PlacementNode>;
  /** Orders a replica loaded (LoadModel); it counts as loading at once. */
  load(node: string, order: LoadOrder): void;
  /** Orders a replica unloaded (UnloadModel). */
  unload(node: string, model: string): void;
}

/** One placement decision at a time per model across schedulers. */
export interface PlacementClaims {
  /** True when this scheduler may place `model` now (for `ttlMs`); false when another one does. */
  claim(model: string, ttlMs: number): Promise<boolean>;
}

export interface PlacerOptions {
  view: PlacementView;
  /** The catalog model an id names, or undefined. */
  model(id: string): PlacedModel | undefined;
  /** Every catalog model (for min_replicas). */
  models(): Iterable<PlacedModel>;
  /** Bytes one replica of `model` takes (the estimate, or its memory_bytes). */
  size(model: PlacedModel): Promise<number>;
  claims?: PlacementClaims;
  /** How long a node a load failed on is passed over for that model. Default 5 minutes. */
  avoidMs?: number;
  logger: Logger;
  /** The clock (ms). Default Date.now. */
  now?: () => number;
}

/** How long a claim holds: longer than a decision, shorter than a load's wait. */
const CLAIM_MS = 10_000;

export class Placer {
  /** Nodes each model's load failed on recently, with when. */
  private readonly failures = new Map<string, Map<string, number>>();
  /** Decisions under way, by model (a second request for the model joins the first). */
  private readonly deciding = new Map<string, Promise<void>>();
  private readonly now: () => number;
  /** Sizes learned, by model and shape (statusNow reads them without waiting). */
  private readonly sizes = new Map<string, number>();

  constructor(private readonly options: PlacerOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Makes sure a replica of `id` is ready or on its way: orders one when none is (`wanted`: one more
   * than those loaded or loading, up to max_replicas). Rejects with 503 `model_too_large` when no node
   * could ever hold it; resolves otherwise (without room now, the request waits for a replica to free some).
   */
  ensure(id: string, wanted = 1): Promise<void> {
    const model = this.options.model(id);
    if (!model) return Promise.resolve();
    const running = this.deciding.get(id);
    if (running) return running;
    const decision = this.decide(model, Math.min(wanted, model.maxReplicas)).finally(() => this.deciding.delete(id));
    this.deciding.set(id, decision);
    return decision;
  }

  /** Orders loads for the catalog models below their min_replicas (called on a timer and when a node leaves). */
  async keepMinimums(): Promise<void> {
    for (const model of this.options.models()) {
      if (model.minReplicas > 0 && this.replicas(model.id) < model.minReplicas) await this.ensure(model.id, model.minReplicas).catch(() => undefined);
    }
  }

  /** A node reported a load failed: it is passed over for that model for a while. */
  failed(node: string, id: string, reason: string): void {
    if (!this.options.model(id)) return; // not a catalog model: nothing to avoid (and nothing a node's reports may grow)
    const since = this.now() - (this.options.avoidMs ?? 5 * 60_000);
    for (const [model, nodes] of this.failures) {
      for (const [n, at] of nodes) if (at < since) nodes.delete(n);
      if (nodes.size === 0) this.failures.delete(model);
    }
    let nodes = this.failures.get(id);
    if (!nodes) this.failures.set(id, (nodes = new Map()));
    nodes.set(node, this.now());
    this.options.logger.warn({ node, model: id, reason }, "a replica failed to load; placing it elsewhere");
  }

  /** Replicas of `id` loaded or loading, fleet-wide. */
  replicas(id: string): number {
    let count = 0;
    for (const node of this.options.view.nodes()) for (const r of node.replicas) if (r.model === id && r.state !== "unloading") count++;
    return count;
  }

  /** What placing `id` would meet now: a node has room, or no node could ever hold it (its size once known). */
  async status(id: string): Promise<"placeable" | "too_large" | "unknown"> {
    const model = this.options.model(id);
    if (!model) return "unknown";
    const bytes = await this.options.size(model).catch(() => undefined);
    if (bytes === undefined) return "unknown";
    return choosePlacement({ model: id, bytes }, this.options.view.nodes(), this.rules(id)).kind === "too_large" ? "too_large" : "placeable";
  }

  /** Orders replicas of `model`, one decision each, until it has `wanted` or no node has room. */
  /** The same as `status` without waiting: "unavailable" until the model's size is known (asked for here). */
  statusNow(id: string): "placeable" | "too_large" | "unavailable" {
    const model = this.options.model(id);
    if (!model) return "unavailable";
    const bytes = this.sizes.get(sizeKey(model));
    if (bytes === undefined) {
      void this.options.size(model).then(
        (b) => this.sizes.set(sizeKey(model), b),
        () => undefined,
      );
      return "unavailable";
    }
    const kind = choosePlacement({ model: id, bytes }, this.options.view.nodes(), this.rules(id)).kind;
    return kind === "place" ? "placeable" : kind === "too_large" ? "too_large" : "unavailable";
  }

  private async decide(model: PlacedModel, wanted: number): Promise<void> {
    while (this.replicas(model.id) < wanted) if (!(await this.placeOne(model, wanted))) return;
  }

  /**
   * Orders one replica of `model`; false when none was ordered. The claim comes first, and between the
   * plan and the orders nothing waits: a decision for another model cannot plan against the same free
   * memory, or choose the same replica to unload, in between.
   */
  private async placeOne(model: PlacedModel, wanted: number): Promise<boolean> {
    const bytes = await this.options.size(model);
    this.sizes.set(sizeKey(model), bytes);
    if (this.options.claims && !(await this.options.claims.claim(model.id, CLAIM_MS))) return false; // another scheduler places it
    if (this.replicas(model.id) >= wanted) return false; // a replica came meanwhile
    const placement = choosePlacement({ model: model.id, bytes }, this.options.view.nodes(), this.rules(model.id));
    if (placement.kind === "too_large") {
      const { node, bytes: most } = placement.largest;
      throw new ServiceUnavailableError(
        "model_too_large",
        `model: "${model.id}" needs ${formatMemory(bytes)} of memory for its context and sequences; the largest node, ${node}, has ${formatMemory(most)}`,
      );
    }
    if (placement.kind === "no_room") {
      this.options.logger.info({ model: model.id, bytes }, "no node has room for a replica now; the request waits for one to free");
      return false;
    }
    for (const evicted of placement.evict) this.options.view.unload(placement.node, evicted);
    this.options.view.load(placement.node, { model, split: placement.split });
    this.options.logger.info({ model: model.id, node: placement.node, split: placement.split, evict: placement.evict }, "replica placed");
    return true;
  }

  private rules(id: string) {
    const recent = this.failures.get(id);
    const avoid = new Set<string>();
    const since = this.now() - (this.options.avoidMs ?? 5 * 60_000);
    for (const [node, at] of recent ?? []) if (at >= since) avoid.add(node);
    return {
      replicasOf: (m: string) => this.replicas(m),
      minReplicasOf: (m: string) => this.options.model(m)?.minReplicas ?? 0,
      avoid,
    };
  }
}

/** What a model's size depends on: a catalog edit of any of it is a new size. */
const sizeKey = (m: PlacedModel) => JSON.stringify([m.id, m.source, m.contextSize, m.sequences, m.memoryBytes ?? null, m.speculative ?? null]);

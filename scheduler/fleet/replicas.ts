/**
 * What the fleet knows of one placeable node's memory and replicas: the devices it offers (Register,
 * then each heartbeat) and the replicas on it, as they were ordered (LoadModel) and as the node
 * reports them (ModelState). Nothing a node reports is taken beyond bounds: at most MAX_DEVICES
 * devices, each of at most MAX_DEVICE_BYTES, and a replica holds what its load order planned, not what
 * the node says it holds (a node cannot make room on paper by under-reporting).
 */
import type { Device__Output, ModelState__Output } from "../../proto/index.js";
import type { PlacementNode, PlacementReplica } from "../placement/index.js";

/** Devices of one node the scheduler takes account of; more are ignored. */
export const MAX_DEVICES = 64;
/** A device's memory is read as at most this (1 PiB). */
const MAX_DEVICE_BYTES = 2 ** 50;
/** Replicas of one node the scheduler keeps track of; a node reporting more is refused them. */
export const MAX_REPLICAS = 256;

export interface DeviceState {
  name: string;
  totalBytes: number;
  freeBytes: number;
}

export interface ReplicaInfo {
  state: "loading" | "ready" | "unloading";
  /** Bytes per device, as planned (the load order) or, for a replica another scheduler ordered, as reported. */
  bytes: number[];
  progress: number;
  /** When it was ordered or last reported progress (ms): a load that stands still too long has failed. */
  progressAt: number;
  /** When it last took a request (ms). */
  lastUsedAt: number;
}

const bytesOf = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.min(Math.floor(n), MAX_DEVICE_BYTES) : 0);

/** A node's devices as reported, bounded. */
export function devicesOf(devices: readonly Device__Output[]): DeviceState[] {
  return devices.slice(0, MAX_DEVICES).map((d) => {
    const totalBytes = bytesOf(Number(d.total_bytes));
    return { name: d.name.slice(0, 128), totalBytes, freeBytes: Math.min(totalBytes, bytesOf(Number(d.free_bytes))) };
  });
}

export class NodeReplicas {
  devices: DeviceState[];
  readonly replicas = new Map<string, ReplicaInfo>();

  constructor(
    /** Whether the node takes placed replicas. */
    readonly placeable: boolean,
    devices: readonly Device__Output[],
  ) {
    this.devices = devicesOf(devices);
  }

  /** A heartbeat's devices (the same count as at Register; a change of count is ignored). */
  updateDevices(devices: readonly Device__Output[]): void {
    const next = devicesOf(devices);
    if (next.length === this.devices.length) this.devices = next;
  }

  /** A load this scheduler ordered: it counts at once, with the planned bytes. */
  ordered(model: string, split: readonly number[], now: number): void {
    this.replicas.set(model, { state: "loading", bytes: split.map(bytesOf), progress: 0, progressAt: now, lastUsedAt: now });
  }

  /**
   * A ModelState from the node. Returns what the fleet must do: add the pool (ready), drop it (unloaded
   * or failed), or nothing. A report for more replicas than MAX_REPLICAS is ignored, and so is a FAILED
   * or UNLOADED of a replica not known here (nothing to drop) and a READY of one being unloaded.
   */
  reported(state: ModelState__Output, now: number): "ready" | "gone" | "failed" | undefined {
    const model = state.model_id;
    const known = this.replicas.get(model);
    if (!known && this.replicas.size >= MAX_REPLICAS) return undefined;
    const reportedBytes = state.device_bytes.slice(0, this.devices.length).map((b) => bytesOf(Number(b)));
    switch (state.state) {
      case "LOADING": {
        const progress = Math.min(1, Math.max(0, state.progress || 0));
        if (!known) this.replicas.set(model, { state: "loading", bytes: reportedBytes, progress, progressAt: now, lastUsedAt: now });
        else if (known.state === "loading" && progress > known.progress) {
          known.progress = progress;
          // a node loads one replica at a time: while one progresses, those queued behind it are not stalled
          for (const r of this.replicas.values()) if (r.state === "loading") r.progressAt = now;
        }
        return undefined;
      }
      case "READY":
        if (known?.state === "unloading") return undefined;
        if (known) {
          known.state = "ready";
          known.progress = 1;
          known.lastUsedAt = now;
        } else this.replicas.set(model, { state: "ready", bytes: reportedBytes, progress: 1, progressAt: now, lastUsedAt: now });
        return "ready";
      case "FAILED":
        return this.replicas.delete(model) ? "failed" : undefined;
      case "UNLOADED":
        return this.replicas.delete(model) ? "gone" : undefined;
      default:
        return undefined;
    }
  }

  /** An unload this scheduler ordered (of a replica it knew, or of one a refused report named: kept till UNLOADED, so the order goes once). */
  unloading(model: string, now = Date.now()): void {
    const r = this.replicas.get(model);
    if (r) r.state = "unloading";
    else if (this.replicas.size < MAX_REPLICAS) this.replicas.set(model, { state: "unloading", bytes: [], progress: 0, progressAt: now, lastUsedAt: now });
  }

  used(model: string, now: number): void {
    const r = this.replicas.get(model);
    if (r) r.lastUsedAt = now;
  }

  /**
   * The node as placement sees it. A device's free memory is the less of what the node reports and
   * what its offer less the replicas known here leaves (a load ordered a moment ago counts before
   * the node's next heartbeat). `keep(model, idleMs)` tells which idle replicas must stay.
   */
  placementNode(id: string, placeable: boolean, inflight: (model: string) => number, keep: (model: string, idleMs: number) => boolean, now: number): PlacementNode {
    const replicas: PlacementReplica[] = [];
    for (const [model, r] of this.replicas) {
      replicas.push({ model, bytes: r.bytes, state: r.state, inflight: inflight(model), lastUsedAt: r.lastUsedAt, keep: keep(model, now - r.lastUsedAt) });
    }
    return {
      id,
      placeable: placeable && this.placeable,
      devices: this.accounted().map((d) => ({ totalBytes: d.totalBytes, freeBytes: d.freeBytes })),
      replicas,
    };
  }

  /**
   * Each device as placement counts it: its free memory is the less of what the node reports and
   * what its offer less the replicas known here leaves (what `placementNode` gives placement, and the
   * dashboard's fleet page shows).
   */
  accounted(): DeviceState[] {
    const held = this.devices.map(() => 0);
    for (const r of this.replicas.values()) r.bytes.forEach((b, i) => i < held.length && (held[i]! += b));
    return this.devices.map((d, i) => ({ name: d.name, totalBytes: d.totalBytes, freeBytes: Math.max(0, Math.min(d.freeBytes, d.totalBytes - held[i]!)) }));
  }
}

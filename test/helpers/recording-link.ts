/**
 * An agent link that records what the Fleet sends it, for the Fleet's unit tests (the gRPC edge
 * replaced, nothing else).
 */
import type { Register__Output, SchedulerMessage } from "../../proto/index.js";
import type { Fleet } from "../../scheduler/fleet/fleet.js";
import type { AgentLink } from "../../scheduler/fleet/types.js";

export class RecordingLink implements AgentLink {
  sent: SchedulerMessage[] = [];
  closed?: string;
  send(m: SchedulerMessage): void {
    this.sent.push(m);
  }
  close(reason: string): void {
    this.closed = reason;
  }
  /** The request ids of the completions (and embeddings requests) sent, in order. */
  requests(): string[] {
    return this.sent.flatMap((m) => (m.completion ? [m.completion.request_id!] : m.embedding ? [m.embedding.request_id!] : []));
  }
}

/** A node's Register with one pool of `slots` slots serving `models` (a served --serve list, not placeable). */
export function servingNode(nodeId: string, slots: number, options: { models?: string[]; capabilities?: string[] } = {}): Register__Output {
  return {
    node_id: nodeId,
    agent_version: "test",
    hardware: null,
    transcription: null,
    placeable: false,
    devices: [],
    replicas: [],
    pools: [{ model_ids: options.models ?? ["famB-v3.1"], slots, context_size: 2048, fingerprint: "fp_test", capabilities: options.capabilities ?? [] }],
  };
}

/** A heartbeat of node `nodeId` whose own work (or other schedulers') holds `local` slots of each pool. */
export function heartbeat(f: Fleet, nodeId: string, link: AgentLink, local: number[]): void {
  f.receive(nodeId, link, {
    body: "heartbeat",
    heartbeat: {
      busy_slots: local,
      local_busy_slots: local,
      memory_used_bytes: 0,
      memory_free_bytes: 0,
      device_memory_used_bytes: 0,
      device_memory_total_bytes: 0,
      disk_free_bytes: 0,
      transcription_jobs: 0,
      devices: [],
      pool_models: [],
    },
  });
}

/**
 * An agent's links to several schedulers (`--scheduler a:50051,b:50051`), over one engine: every
 * scheduler can route to this node, and a scheduler that dies costs only its own requests.
 *
 * Each scheduler counts the slots it filled; the slots the others filled reach it as the node's
 * own work (heartbeat `local_busy_slots`), told at once whenever they change. Two schedulers may
 * still send to the last free slot at the same moment: the link that receives the second refuses
 * it at once (`node_busy`, retryable), and its scheduler queues it or sends it to another node.
 */
import type { HostPort } from "../../config/index.js";
import type { ModelPool } from "../llm/index.js";
import type { ReplicaReport } from "../placement/index.js";
import { FleetLink, type FleetLinkOptions, type LinkPeers, type LinkState } from "./link.js";

export interface SchedulerLinksOptions extends Omit<FleetLinkOptions, "scheduler" | "peers" | "backoff"> {
  /** The schedulers to dial, one link each. */
  schedulers: readonly HostPort[];
}

export class SchedulerLinks implements LinkPeers {
  readonly links: readonly FleetLink[];

  constructor(options: SchedulerLinksOptions) {
    const { schedulers, ...shared } = options;
    this.links = schedulers.map((scheduler) => new FleetLink({ ...shared, scheduler, ...(schedulers.length > 1 ? { peers: this } : {}) }));
  }

  othersHold(link: FleetLink, pool: ModelPool): number {
    let n = 0;
    for (const other of this.links) if (other !== link) n += other.holds(pool);
    return n;
  }

  changed(link: FleetLink): void {
    for (const other of this.links) if (other !== link) other.tellSlots();
  }

  start(): void {
    for (const link of this.links) link.start();
  }

  /** Tells every scheduler a replica's state: each routes to it, whichever ordered it. */
  tellReplica(report: ReplicaReport): void {
    for (const link of this.links) link.tellReplica(report);
  }

  /** Drains every link at once (each tells its scheduler, and waits for the node's work). */
  async drain(deadlineMs: number): Promise<void> {
    await Promise.all(this.links.map((link) => link.drain(deadlineMs)));
  }

  async stop(): Promise<void> {
    await Promise.all(this.links.map((link) => link.stop()));
  }

  /** "connected" when every link is; else the least advanced state of one. */
  get state(): LinkState {
    const order: LinkState[] = ["stopped", "disconnected", "connecting", "connected"];
    return this.links.map((l) => l.state).sort((a, b) => order.indexOf(a) - order.indexOf(b))[0] ?? "disconnected";
  }

  /** Links whose scheduler has registered this node. */
  get connected(): number {
    return this.links.filter((l) => l.state === "connected").length;
  }

  /** Each scheduler's address and its link's state. */
  describe(): { address: string; state: LinkState }[] {
    return this.links.map((l) => ({ address: l.address, state: l.state }));
  }
}

/**
 * An agent link that records what the Fleet sends it, for the Fleet's unit tests (the gRPC edge
 * replaced, nothing else).
 */
import type { SchedulerMessage } from "../../proto/index.js";
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
  /** The request ids of the completions sent, in order. */
  requests(): string[] {
    return this.sent.filter((m) => m.completion).map((m) => m.completion!.request_id!);
  }
}

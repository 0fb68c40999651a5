/**
 * A scheduler played by a bare grpc-js server in the test's process, for the agent's link tests:
 * `Connect` is the test's own, and `linkTo` dials it with a FleetLink of the test node.
 */
import * as grpc from "@grpc/grpc-js";
import { createLogger } from "../../core/log.js";
import { FleetLink, type FleetLinkOptions } from "../../agent/link/index.js";
import { fleetProto, type AgentMessage__Output, type SchedulerMessage } from "../../proto/index.js";

export type SchedulerCall = grpc.ServerDuplexStream<AgentMessage__Output, SchedulerMessage>;

/** Serves Fleet/Connect with `connect` on a free port of 127.0.0.1 (plaintext). */
export async function bareScheduler(connect: (call: SchedulerCall) => void): Promise<{ port: number; close: () => void }> {
  const server = new grpc.Server();
  server.addService(fleetProto().kiln.v1.Fleet.service, { Connect: connect });
  const port = await new Promise<number>((ok, fail) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? fail(err) : ok(p))));
  return { port, close: () => server.forceShutdown() };
}

/** A FleetLink of node "n" (token "t", a 2-core CPU machine, silent) to the scheduler on `port`, with `options` over those. */
export function linkTo(port: number, options: Pick<FleetLinkOptions, "engine"> & Partial<FleetLinkOptions>): FleetLink {
  return new FleetLink({
    scheduler: { host: "127.0.0.1", port },
    nodeToken: "t",
    nodeId: "n",
    hardware: { compute: "cpu", gpus: [], cpu_model: "test", cpu_cores: 2, memory_total_bytes: 0, cuda_available: false, disk_path: "", disk_total_bytes: 0 },
    logger: createLogger("test", "silent"),
    ...options,
  });
}

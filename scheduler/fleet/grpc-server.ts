/**
 * The scheduler's gRPC edge: the `kiln.v1.Fleet/Connect` stream. Authenticates the node token,
 * waits for Register, then relays messages between the stream and the `Fleet`.
 */
import { timingSafeEqual, createHash } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../../core/log.js";
import { fleetProto, NODE_TOKEN_METADATA, type AgentMessage__Output, type SchedulerMessage } from "../../proto/index.js";
import type { Fleet } from "./fleet.js";
import type { AgentLink } from "./types.js";

export interface FleetServerOptions {
  fleet: Fleet;
  /** Tokens agents may present. */
  nodeTokens: string[];
  logger: Logger;
}

const digest = (s: string): Buffer => createHash("sha256").update(s).digest();

/** Constant-time membership test of a presented bearer token. */
function tokenAccepted(presented: string, accepted: Buffer[]): boolean {
  const d = digest(presented);
  let ok = false;
  for (const a of accepted) ok = timingSafeEqual(a, d) || ok;
  return ok;
}

type ConnectCall = grpc.ServerDuplexStream<AgentMessage__Output, SchedulerMessage>;

export function createFleetServer({ fleet, nodeTokens, logger }: FleetServerOptions): grpc.Server {
  const accepted = nodeTokens.map(digest);
  const server = new grpc.Server({
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.http2.min_ping_interval_without_data_ms": 5_000,
  });
  server.addService(fleetProto().kiln.v1.Fleet.service, {
    Connect: (call: ConnectCall) => {
      const header = String(call.metadata.get(NODE_TOKEN_METADATA)[0] ?? "");
      const token = header.startsWith("Bearer ") ? header.slice(7) : "";
      if (!token || !tokenAccepted(token, accepted)) {
        logger.warn({ peer: call.getPeer() }, "agent refused: unknown node token");
        call.emit("error", { code: grpc.status.UNAUTHENTICATED, details: "unknown node token" });
        return;
      }
      let nodeId: string | undefined;
      const link: AgentLink = {
        send: (message) => { if (!call.writableEnded && !call.destroyed) call.write(message); },
        close: (reason) => { if (!call.destroyed) call.emit("error", { code: grpc.status.ABORTED, details: reason }); },
      };
      call.on("data", (message: AgentMessage__Output) => {
        if (nodeId === undefined) {
          if (message.body !== "register" || !message.register?.node_id) {
            call.emit("error", { code: grpc.status.FAILED_PRECONDITION, details: "the first message must be Register with a node_id" });
            return;
          }
          nodeId = message.register.node_id;
          const { heartbeatMs } = fleet.attach(message.register, link);
          link.send({ registered: { node_id: nodeId, heartbeat_interval_ms: heartbeatMs, accepts_chunks: true } });
          return;
        }
        fleet.receive(nodeId, link, message);
      });
      const gone = (reason: string) => () => { if (nodeId !== undefined) fleet.detach(nodeId, link, reason); };
      call.on("end", () => { gone("stream ended")(); if (!call.writableEnded) call.end(); });
      call.on("error", (err: Error) => gone(`stream error: ${err.message}`)());
      call.on("close", gone("connection closed"));
      call.on("cancelled", gone("connection cancelled"));
    },
  });
  return server;
}

/** Binds the server; resolves to the bound port (useful with port 0). */
export function bindFleetServer(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
  });
}

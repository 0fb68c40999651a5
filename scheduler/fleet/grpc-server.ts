/**
 * The scheduler's gRPC edge: the `kiln.v1.Fleet/Connect` stream. Authenticates the node token,
 * waits for Register, checks that the token may register that node id, then relays messages
 * between the stream and the `Fleet`.
 */
import { matchesDigest, sha256Hex } from "../../core/digest.js";
import { parseBearer } from "../../core/http/bearer.js";
import * as grpc from "@grpc/grpc-js";
import { FLEET_MESSAGE_BYTES } from "../../core/chat.js";
import { nodeIdMatcher, type NodeTokenEntry } from "../../config/index.js";
import type { Logger } from "../../core/log.js";
import { fleetProto, NODE_TOKEN_METADATA, type AgentMessage__Output, type SchedulerMessage } from "../../proto/index.js";
import type { Fleet } from "./fleet.js";
import type { AgentLink } from "./types.js";

export interface FleetServerOptions {
  fleet: Fleet;
  /** Tokens agents may present, each with the node ids it may register (none: any). */
  nodeTokens: NodeTokenEntry[];
  logger: Logger;
}

interface AcceptedToken {
  /** The token's SHA-256, hex. */
  digest: string;
  covers: (nodeId: string) => boolean;
}

/** The entries whose token is the presented one, compared in constant time against every entry. */
function tokenMatches(presented: string, accepted: AcceptedToken[]): AcceptedToken[] {
  const matches: AcceptedToken[] = [];
  for (const a of accepted) if (matchesDigest(presented, a.digest)) matches.push(a);
  return matches;
}

type ConnectCall = grpc.ServerDuplexStream<AgentMessage__Output, SchedulerMessage>;

export function createFleetServer({ fleet, nodeTokens, logger }: FleetServerOptions): grpc.Server {
  const accepted = nodeTokens.map((t): AcceptedToken => ({ digest: sha256Hex(t.token), covers: nodeIdMatcher(t.nodeIds) }));
  const server = new grpc.Server({
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.http2.min_ping_interval_without_data_ms": 5_000,
    "grpc.max_receive_message_length": FLEET_MESSAGE_BYTES,
    "grpc.max_send_message_length": FLEET_MESSAGE_BYTES,
  });
  server.addService(fleetProto().kiln.v1.Fleet.service, {
    Connect: (call: ConnectCall) => {
      const header = String(call.metadata.get(NODE_TOKEN_METADATA)[0] ?? "");
      const token = parseBearer(header) ?? "";
      const matches = token ? tokenMatches(token, accepted) : [];
      if (matches.length === 0) {
        logger.warn({ peer: call.getPeer() }, "agent refused: unknown node token");
        call.emit("error", { code: grpc.status.UNAUTHENTICATED, details: "unknown node token" });
        return;
      }
      let nodeId: string | undefined;
      let refused = false;
      const refuse = (code: grpc.status, details: string): void => {
        refused = true;
        call.emit("error", { code, details });
      };
      const link: AgentLink = {
        // Which token this stream presented (its digest, never the token): only the same one may replace it.
        credential: sha256Hex(token),
        send: (message) => (!call.writableEnded && !call.destroyed ? call.write(message) : true),
        drained: (signal) =>
          new Promise<void>((resolve) => {
            if (!call.writableNeedDrain || call.destroyed) return resolve();
            const done = () => {
              call.off("drain", done);
              call.off("close", done);
              signal?.removeEventListener("abort", done);
              resolve();
            };
            call.once("drain", done);
            call.once("close", done);
            signal?.addEventListener("abort", done, { once: true });
          }),
        close: (reason) => {
          if (!call.destroyed) call.emit("error", { code: grpc.status.ABORTED, details: reason });
        },
      };
      call.on("data", (message: AgentMessage__Output) => {
        if (refused) return;
        if (nodeId === undefined) {
          if (message.body !== "register" || !message.register?.node_id) {
            refuse(grpc.status.FAILED_PRECONDITION, "the first message must be Register with a node_id");
            return;
          }
          const wanted = message.register.node_id;
          if (!matches.some((m) => m.covers(wanted))) {
            logger.warn({ peer: call.getPeer(), node: wanted }, "agent refused: its node token may not register this node id");
            refuse(grpc.status.PERMISSION_DENIED, `this node token may not register node id "${wanted}"`);
            return;
          }
          const attached = fleet.attach(message.register, link);
          if ("refused" in attached) {
            logger.warn({ peer: call.getPeer(), node: wanted }, `agent refused: ${attached.refused}`);
            refuse(grpc.status.ALREADY_EXISTS, attached.refused);
            return;
          }
          nodeId = wanted;
          link.send({ registered: { node_id: nodeId, heartbeat_interval_ms: attached.heartbeatMs, accepts_chunks: true } });
          return;
        }
        fleet.receive(nodeId, link, message);
      });
      const gone = (reason: string) => () => {
        if (nodeId !== undefined) fleet.detach(nodeId, link, reason);
      };
      call.on("end", () => {
        gone("stream ended")();
        if (!call.writableEnded) call.end();
      });
      call.on("error", (err: Error) => gone(`stream error: ${err.message}`)());
      call.on("close", gone("connection closed"));
      call.on("cancelled", gone("connection cancelled"));
    },
  });
  return server;
}

/** Binds the server (plaintext unless TLS `credentials` are given); resolves to the bound port (useful with port 0). */
export function bindFleetServer(server: grpc.Server, address: string, credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure()): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (err, port) => (err ? reject(err) : resolve(port)));
  });
}

/**
 * The scheduler's gRPC edge: the `kiln.v1.Fleet/Connect` stream. Authenticates the node token,
 * waits for Register, checks what it claims against what the token allows (its node id, models and
 * slots; with mutual TLS, the client certificate's name too), then relays messages between the
 * stream and the `Fleet`. A message past its kind's size cap (limits.ts) closes that stream only.
 */
import { matchesDigest, sha256Hex } from "../../core/digest.js";
import { parseBearer } from "../../core/http/bearer.js";
import * as grpc from "@grpc/grpc-js";
import { FLEET_MESSAGE_BYTES } from "../../core/chat.js";
import { isValidNodeId, NODE_ID_RULE, nodeIdMatcher, type NodeTokenEntry } from "../../config/index.js";
import type { Logger } from "../../core/log.js";
import { fleetProto, NODE_TOKEN_METADATA, type AgentMessage__Output, type Register__Output, type SchedulerMessage } from "../../proto/index.js";
import type { Fleet } from "./fleet.js";
import { FLEET_RECEIVE_BYTES, MAX_CONTEXT_SIZE, MESSAGE_CAPS, messageCap } from "./limits.js";
import type { AgentLink } from "./types.js";

export interface FleetServerOptions {
  fleet: Fleet;
  /** Tokens agents may present, each with the node ids it may register (none: any), the models and slots its nodes may offer. */
  nodeTokens: NodeTokenEntry[];
  /** Most slots a node may register when its token names none (`--max-node-slots`). */
  maxNodeSlots: number;
  /** Mutual TLS is on (`--grpc-client-ca`): a node id must be its client certificate's CN or one of its DNS names. */
  bindCertificates?: boolean;
  /** A connection with no call open for this long is closed (`--idle-timeout`); an agent's link is a call. Default: none. */
  idleTimeoutMs?: number;
  logger: Logger;
}

interface AcceptedToken {
  /** The token's SHA-256, hex. */
  digest: string;
  covers: (nodeId: string) => boolean;
  /** Whether its nodes may offer a model (chat id or whisper name). */
  offers: (model: string) => boolean;
  /** Most slots one of its nodes may register. */
  slots: number;
}

/**
 * Why `register` claims more than `token` allows, or undefined: every model it offers (chat pools'
 * ids, whisper models installed, downloaded on demand or standing for whisper-1) must be allowed;
 * its pools' slots together, and its transcription slots, at most the token's slots; each pool's
 * context at most MAX_CONTEXT_SIZE.
 */
export function registerRefusal(register: Register__Output, token: Pick<AcceptedToken, "offers" | "slots">): string | undefined {
  const t = register.transcription;
  const models = [...register.pools.flatMap((p) => p.model_ids), ...(t ? [...t.models, ...t.on_demand_models, ...(t.default_model ? [t.default_model] : [])] : [])];
  const refused = [...new Set(models.filter((m) => !token.offers(m)))];
  if (refused.length > 0)
    return `this node token may not offer model${refused.length > 1 ? "s" : ""} ${refused
      .slice(0, 5)
      .map((m) => JSON.stringify(m.slice(0, 128)))
      .join(", ")}`;
  const slots = register.pools.reduce((n, p) => n + p.slots, 0);
  if (slots > token.slots) return `${slots} slots claimed; this node token allows at most ${token.slots} per node (--max-node-slots, or slots: in its --node-tokens entry)`;
  if (t && t.slots > token.slots) return `${t.slots} transcription slots claimed; this node token allows at most ${token.slots} per node`;
  const wide = register.pools.find((p) => p.context_size > MAX_CONTEXT_SIZE);
  if (wide) return `a context of ${wide.context_size} tokens claimed; at most ${MAX_CONTEXT_SIZE}`;
  return undefined;
}

/** The names a client certificate stands for: its subject's CN and its DNS subject alternative names. */
function certificateNames(cert: { subject?: Partial<Record<string, string | string[]>>; subjectaltname?: string } | undefined): string[] {
  if (!cert) return [];
  const cn = cert.subject?.CN;
  const names = Array.isArray(cn) ? [...cn] : cn ? [cn] : [];
  for (const part of (cert.subjectaltname ?? "").split(",")) {
    const m = /^\s*DNS:(.+)$/.exec(part);
    if (m) names.push(m[1]!.trim());
  }
  return names;
}

/** The byte length of each message as it came off the wire (the deserializer records it). */
const wireBytes = new WeakMap<object, number>();

/** AgentMessage's oneof `body`, by field number (proto/kiln/v1/fleet.proto). */
const BODY_FIELDS: readonly NonNullable<AgentMessage__Output["body"]>[] = [
  "register",
  "heartbeat",
  "chunk",
  "done",
  "error",
  "draining",
  "chunks",
  "embeddings",
  "transcription_ack",
  "transcription_segments",
  "transcription_done",
  "model_state",
];

/** Below this, no message is past any kind's cap. */
const SMALLEST_CAP = Math.min(...Object.values(MESSAGE_CAPS));

/**
 * The first body kind among the message's top-level fields whose cap `bytes` exceeds, read from the
 * fields' tags alone (a varint key: field number << 3 | wire type; length-delimited fields skipped
 * by their length), or undefined: a message past its kind's cap is refused before it is decoded.
 */
export function oversizedKind(bytes: Buffer): NonNullable<AgentMessage__Output["body"]> | undefined {
  let at = 0;
  const varint = (): number => {
    let value = 0;
    for (let shift = 0; at < bytes.length && shift < 49; shift += 7) {
      const b = bytes[at++]!;
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
    return -1;
  };
  while (at < bytes.length) {
    const key = varint();
    if (key < 0) return undefined;
    const kind = BODY_FIELDS[Math.floor(key / 8) - 1];
    if (kind && bytes.length > MESSAGE_CAPS[kind]) return kind;
    const wire = key & 7;
    if (wire === 0) varint();
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      if (length < 0) return undefined;
      at += length;
    } else return undefined; // not a message: the decoder says so
  }
  return undefined;
}

/**
 * The Fleet service's definition with a deserializer that records each inbound message's size and
 * decodes no message past its kind's cap: such a message becomes a bodyless stand-in of that kind,
 * which the stream's handler refuses for its size.
 */
function measuredService(): grpc.ServiceDefinition {
  const service = fleetProto().kiln.v1.Fleet.service;
  const connect = service.Connect;
  return {
    ...service,
    Connect: {
      ...connect,
      requestDeserialize: (bytes: Buffer) => {
        const oversized = bytes.length > SMALLEST_CAP ? oversizedKind(bytes) : undefined;
        const message = oversized ? { body: oversized } : (connect.requestDeserialize(bytes) as object);
        wireBytes.set(message, bytes.length);
        return message;
      },
    },
  } as grpc.ServiceDefinition;
}

/** The entries whose token is the presented one, compared in constant time against every entry. */
function tokenMatches(presented: string, accepted: AcceptedToken[]): AcceptedToken[] {
  const matches: AcceptedToken[] = [];
  for (const a of accepted) if (matchesDigest(presented, a.digest)) matches.push(a);
  return matches;
}

type ConnectCall = grpc.ServerDuplexStream<AgentMessage__Output, SchedulerMessage>;

export function createFleetServer({ fleet, nodeTokens, maxNodeSlots, bindCertificates = false, idleTimeoutMs, logger }: FleetServerOptions): grpc.Server {
  const accepted = nodeTokens.map((t): AcceptedToken => ({
    digest: sha256Hex(t.token),
    covers: nodeIdMatcher(t.nodeIds),
    offers: nodeIdMatcher(t.models),
    slots: t.slots ?? maxNodeSlots,
  }));
  const server = new grpc.Server({
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.keepalive_permit_without_calls": 1,
    ...(idleTimeoutMs ? { "grpc.max_connection_idle_ms": idleTimeoutMs } : {}),
    "grpc.http2.min_ping_interval_without_data_ms": 5_000,
    // a node's messages are capped per kind below (limits.ts); this is the largest kind's cap
    "grpc.max_receive_message_length": FLEET_RECEIVE_BYTES,
    "grpc.max_send_message_length": FLEET_MESSAGE_BYTES,
  });
  server.addService(measuredService(), {
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
      // the token entry the node's Register fitted (set then): what it may offer and how many slots, for its placed replicas
      let entry: Pick<AcceptedToken, "offers" | "slots"> | undefined;
      const link: AgentLink = {
        // Which token this stream presented (its digest, never the token): only the same one may replace it.
        credential: sha256Hex(token),
        offers: (model) => entry?.offers(model) ?? false,
        get maxSlots() {
          return entry?.slots ?? 0;
        },
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
        const bytes = wireBytes.get(message) ?? 0;
        if (bytes > messageCap(message.body)) {
          // this node's link only: its requests move on or fail, the scheduler and other nodes go on
          const kind = message.body ?? "empty";
          logger.warn({ peer: call.getPeer(), node: nodeId, kind, bytes, cap: messageCap(message.body) }, "node link closed: a message past its kind's size cap");
          // struck against its id and its token, across reconnects: three such messages drain it
          if (nodeId !== undefined) fleet.rejected(nodeId, "oversized_message", { kind, bytes }, link.credential);
          refuse(grpc.status.RESOURCE_EXHAUSTED, `a ${kind} message of ${bytes} bytes; the scheduler takes at most ${messageCap(message.body)}`);
          return;
        }
        if (nodeId === undefined) {
          if (message.body !== "register" || !message.register?.node_id) {
            refuse(grpc.status.FAILED_PRECONDITION, "the first message must be Register with a node_id");
            return;
          }
          const wanted = message.register.node_id;
          if (!isValidNodeId(wanted)) {
            logger.warn({ peer: call.getPeer(), node: wanted.slice(0, 128) }, "agent refused: not a node id");
            refuse(grpc.status.INVALID_ARGUMENT, `a node id is ${NODE_ID_RULE}`);
            return;
          }
          const allowed = matches.filter((m) => m.covers(wanted));
          if (allowed.length === 0) {
            logger.warn({ peer: call.getPeer(), node: wanted }, "agent refused: its node token may not register this node id");
            refuse(grpc.status.PERMISSION_DENIED, `this node token may not register node id "${wanted}"`);
            return;
          }
          if (bindCertificates) {
            const names = certificateNames(call.getAuthContext()?.sslPeerCertificate);
            if (!names.includes(wanted)) {
              logger.warn({ peer: call.getPeer(), node: wanted, certificate: names.slice(0, 5) }, "agent refused: its client certificate does not name this node id");
              refuse(grpc.status.PERMISSION_DENIED, `this client certificate may not register node id "${wanted}" (its CN or a DNS name must be the node id)`);
              return;
            }
          }
          // several entries may share a token: the first whose claims fit
          const refusals = allowed.map((m) => registerRefusal(message.register!, m));
          entry = allowed[refusals.indexOf(undefined)];
          if (!refusals.includes(undefined)) {
            logger.warn({ peer: call.getPeer(), node: wanted, why: refusals[0] }, "agent refused: it claims more than its node token allows");
            refuse(grpc.status.PERMISSION_DENIED, refusals[0]!);
            return;
          }
          const attached = fleet.attach(message.register, link);
          if ("refused" in attached) {
            logger.warn({ peer: call.getPeer(), node: wanted }, `agent refused: ${attached.refused}`);
            refuse(attached.distrusted ? grpc.status.PERMISSION_DENIED : grpc.status.ALREADY_EXISTS, attached.refused);
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

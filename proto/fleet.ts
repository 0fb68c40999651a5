/**
 * The fleet gRPC contract, loaded from `kiln/v1/fleet.proto` at run time (proto-loader over
 * protobufjs) and typed by the interfaces `npm run gen:proto` writes into `proto/gen/`.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { ProtoGrpcType } from "./gen/fleet.js";

export type { AgentMessage, AgentMessage__Output } from "./gen/kiln/v1/AgentMessage.js";
export type { SchedulerMessage, SchedulerMessage__Output } from "./gen/kiln/v1/SchedulerMessage.js";
export type { Register__Output } from "./gen/kiln/v1/Register.js";
export type { Hardware, Hardware__Output } from "./gen/kiln/v1/Hardware.js";
export type { CompletionRequest__Output } from "./gen/kiln/v1/CompletionRequest.js";
export type { CompletionChunk__Output } from "./gen/kiln/v1/CompletionChunk.js";
export type { EmbeddingRequest__Output } from "./gen/kiln/v1/EmbeddingRequest.js";
export type { TranscriptionRequest__Output } from "./gen/kiln/v1/TranscriptionRequest.js";
export type { Transcription, Transcription__Output } from "./gen/kiln/v1/Transcription.js";
export type { CompletionError__Output } from "./gen/kiln/v1/CompletionError.js";
export type { FleetClient } from "./gen/kiln/v1/Fleet.js";
export type { Device, Device__Output } from "./gen/kiln/v1/Device.js";
export type { ModelState, ModelState__Output } from "./gen/kiln/v1/ModelState.js";
export type { LoadModel__Output } from "./gen/kiln/v1/LoadModel.js";
export type { ModelPool, ModelPool__Output } from "./gen/kiln/v1/ModelPool.js";

/** Where the .proto files live: beside this module in the source tree; from `dist/proto`, back in `proto/`. */
function protoRoot(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return existsSync(join(here, "kiln", "v1", "fleet.proto")) ? here : join(here, "..", "..", "proto");
}

let cached: ProtoGrpcType | undefined;

/** The loaded `kiln.v1` package: `fleet().kiln.v1.Fleet` is the service's client constructor and definition. */
export function fleetProto(): ProtoGrpcType {
  cached ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(join(protoRoot(), "kiln", "v1", "fleet.proto"), {
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
    }),
  ) as unknown as ProtoGrpcType;
  return cached;
}

/** Metadata key carrying the agent's node token (`Bearer <token>`). */
export const NODE_TOKEN_METADATA = "authorization";

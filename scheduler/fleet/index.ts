export { Fleet, type FleetOptions, type FleetPlacement, type PlacementStatus } from "./fleet.js";
export { createFleetServer, bindFleetServer, type FleetServerOptions } from "./grpc-server.js";
export type { CompletionEvent, CompletionRequest, ChatMessage, AgentSnapshot, TokenLogprob } from "./types.js";
export { DEFAULT_AUDIO_MODEL, type AudioEvent, type AudioRequest } from "./audio.js";

export { Fleet, type FleetOptions } from "./fleet.js";
export { createFleetServer, bindFleetServer, type FleetServerOptions } from "./grpc-server.js";
export type { CompletionEvent, CompletionRequest, ChatMessage, AgentSnapshot, TokenLogprob } from "./types.js";

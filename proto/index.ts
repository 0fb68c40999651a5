/** The fleet gRPC contract: `fleet.ts`. */
export * from "./fleet.js";

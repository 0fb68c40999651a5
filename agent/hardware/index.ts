/** The machine a node runs on: `probe.ts`. */
export * from "./probe.js";

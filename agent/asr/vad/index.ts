/** Voice-activity detection: `vad.ts`. */
export * from "./vad.js";

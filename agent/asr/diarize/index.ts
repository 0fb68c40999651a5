/** Speaker diarization: `diarize.ts`. */
export * from "./diarize.js";

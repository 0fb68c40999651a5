/** The web UI: `routes.ts`. */
export * from "./routes.js";

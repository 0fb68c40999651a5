/** The dashboard: `routes.ts`. */
export * from "./routes.js";

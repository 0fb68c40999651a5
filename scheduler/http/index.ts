export { createHttpApp } from "./app.js";
export type { HttpDeps, AppEnv } from "./env.js";

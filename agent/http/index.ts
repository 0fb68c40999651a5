export { createAgentApp, type AgentHttpDeps, type AgentEnv } from "./app.js";

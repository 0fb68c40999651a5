export { createAgentApp, type AgentHttpDeps, type AgentEnv, type NodeInfo } from "./app.js";

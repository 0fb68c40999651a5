/**
 * Configuration, parsed and validated in one place: every command imports it from here.
 *
 * Every option is declared once, in its command's table: its flag, its `KILN_*` environment twin,
 * its default and its validator. The CLI builds its flags from these declarations (flag beats env
 * beats default), then hands the raw strings to `parseSchedulerConfig` / `parseAgentConfig`, which
 * return typed, validated configs or throw a `ConfigError` naming the flag and its variable.
 *
 * This file only re-exports; the code is beside it, one concern a file:
 * - `values.ts`: the value schemas options are declared with (sizes, durations, HOST:PORT, CIDRs…)
 * - `node-tokens.ts`: `--node-tokens` entries, the node-id rule and the `*` glob matcher
 * - `option-table.ts`: what an option is, and `parseWith`, `optionName`, `maskSecrets`
 * - `shared-options.ts`: `--log-level` and `--drain-seconds`, which several commands declare
 * - `scheduler.ts`, `agent.ts`, `models.ts`: each command's table, config and cross-option rules
 * - `tls.ts`, `stdio-catalog.ts`, `whisper-catalog.ts`: what some options' files hold, loaded
 */
export { formatHostPort, isLoopback, type HostPort } from "../core/net.js";
export type { GpuKind } from "../core/prebuilt.js";
export type { StdioCatalog, StdioServerSpec } from "./stdio-catalog.js";
export type { SizeOrShare } from "./values.js";
export { NODE_ID_RULE, globMatches, isValidNodeId, nodeIdMatcher, parseNodeTokenEntry, type NodeTokenEntry } from "./node-tokens.js";
export { maskSecrets, optionKey, optionName, type OptionSpec } from "./option-table.js";
export {
  DEFAULT_AUDIO_SECONDS_PER_DAY,
  DEFAULT_AUDIO_SECONDS_PER_MINUTE,
  DEFAULT_MAX_INFLIGHT,
  DEFAULT_TOKENS_PER_DAY,
  DEFAULT_TOKENS_PER_MINUTE,
  SCHEDULER_OPTIONS,
  parseSchedulerConfig,
  type SchedulerConfig,
} from "./scheduler.js";
export { AGENT_OPTIONS, parseAgentConfig, type AgentConfig } from "./agent.js";
export { MODELS_OPTIONS, parseModelsConfig, type ModelsConfig } from "./models.js";

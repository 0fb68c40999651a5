/** `kiln models`' options: the agent's that it shares, and its typed config. */
import { AGENT_OPTIONS } from "./agent.js";
import { parseWith, type Parsed, type Raw } from "./option-table.js";

/** Options of `kiln models`: the agent's folders, hub and catalog (and `--serve`, whose ids `list` shows). */
export const MODELS_OPTIONS = (({ whisperDir, modelsDir, hubUrl, hfToken, whisperCatalog, serve, logLevel }) => ({
  whisperDir,
  modelsDir,
  hubUrl,
  hfToken,
  whisperCatalog,
  serve,
  logLevel,
}))(AGENT_OPTIONS);
export type ModelsConfig = Parsed<typeof MODELS_OPTIONS>;

export function parseModelsConfig(raw: Raw): ModelsConfig {
  return parseWith(MODELS_OPTIONS, raw);
}

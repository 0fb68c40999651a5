export { LlmEngine, type LlmEngineOptions, type ChatRole, type GenerateOptions, type GenerateResult, type Compute, type ReplicaShape } from "./engine.js";
export {
  LlmEngineError,
  ContextLengthExceededError,
  ModelLoadError,
  ModelNotServedError,
  GenerationAbortedError,
  InvalidResponseFormatError,
  InvalidToolsError,
} from "./errors.js";
export type { TokenLogprob } from "./turn.js";
export type { ModelPool } from "./pool.js";

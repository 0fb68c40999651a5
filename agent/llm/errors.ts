import { MAX_EMBEDDING_BYTES, MAX_EMBEDDING_TOKENS } from "../../core/chat.js";
import type { ErrorCode } from "../../core/error-codes.js";
import { KilnError } from "../../core/errors.js";
import { WIRE } from "../../core/wire-codes.js";
/** Errors of the chat engine. `code` travels to the scheduler in CompletionError. */
export class LlmEngineError extends KilnError<ErrorCode> {
  constructor(
    code: ErrorCode,
    message: string,
    readonly retryable = false,
  ) {
    super(code, message);
  }
}

/** The rendered prompt does not fit the context of one sequence. */
export class ContextLengthExceededError extends LlmEngineError {
  private constructor(detail: string, field = "messages") {
    super("context_length_exceeded", `${field}: ${detail}`);
  }

  /** The rendered prompt, tokenized, is longer than the context. */
  static tokens(promptTokens: number, contextSize: number): ContextLengthExceededError {
    return new ContextLengthExceededError(`the prompt is ${promptTokens} tokens; this model's context holds ${contextSize}`);
  }

  /** An embedding input, tokenized, is longer than the embedding context. */
  static input(index: number, tokens: number, contextSize: number): ContextLengthExceededError {
    return new ContextLengthExceededError(`is ${tokens} tokens; this model's embedding context holds ${contextSize}`, `input[${index}]`);
  }

  /** The messages' text is too long to fit even if every token were the vocabulary's longest (it is not tokenized). */
  static text(textBytes: number, contextSize: number, maxTokenBytes: number, field = "messages"): ContextLengthExceededError {
    return new ContextLengthExceededError(
      `${field === "messages" ? "the messages hold" : "holds"} ${textBytes} bytes of text, more than this model's context of ${contextSize} tokens can hold (its longest token is ${maxTokenBytes} bytes)`,
      field,
    );
  }
}

/** `logit_bias` names a token id the model's vocabulary does not have. */
export class InvalidLogitBiasError extends LlmEngineError {
  constructor(id: string, vocabularySize: number) {
    super("invalid_logit_bias", `logit_bias: token ${id} is not in this model's vocabulary (ids 0 to ${vocabularySize - 1})`);
  }
}

/** `response_format` cannot be turned into a grammar (a schema outside the subset, or one llama.cpp's grammar parser refuses). */
export class InvalidResponseFormatError extends LlmEngineError {
  constructor(detail: string) {
    super("invalid_response_format", detail.startsWith("response_format") ? detail : `response_format: ${detail}`);
  }
}

/** `dimensions` asks for a vector size the model does not produce. */
/** Tools the engine cannot offer as asked (the scheduler checks them first; the agent checks again). */
export class InvalidToolsError extends LlmEngineError {
  constructor(detail: string) {
    super("invalid_tools", detail);
  }
}

export class InvalidDimensionsError extends LlmEngineError {
  constructor(asked: number, size: number) {
    super("invalid_dimensions", `dimensions: this model's embeddings have ${size} dimensions, not ${asked} (omit dimensions, or ask for ${size})`);
  }
}

/** An embeddings request whose vectors would be more than MAX_EMBEDDING_BYTES. */
export class TooManyEmbeddingsError extends LlmEngineError {
  constructor(inputs: number, size: number) {
    super(
      "invalid_input",
      `input: ${inputs} texts of ${size} dimensions make ${Math.ceil((inputs * size * 4) / 1024 / 1024)} MB of vectors; send at most ${Math.floor(MAX_EMBEDDING_BYTES / (size * 4))} texts per request to this model`,
    );
  }
}

/** An embeddings request whose inputs hold more than MAX_EMBEDDING_TOKENS tokens together. */
export class TooManyEmbeddingTokensError extends LlmEngineError {
  constructor(index: number) {
    super("invalid_input", `input: the texts up to input[${index}] hold more than ${MAX_EMBEDDING_TOKENS} tokens together, the most one request may; send fewer per request`);
  }
}

/** `n` asks for more choices than the pool has slots. */
export class InvalidChoicesError extends LlmEngineError {
  constructor(asked: number, slots: number) {
    super("invalid_n", `n: ${asked} choices, but this model runs at most ${slots} at once on a node`);
  }
}

/** A model file that cannot be loaded (missing, not GGUF, truncated, an unknown architecture): the agent cannot start. */
export class ModelLoadError extends LlmEngineError {
  constructor(id: string, path: string, cause: unknown) {
    super("model_load_failed", `${id}: cannot load ${path}: ${loadFailure(cause)}`);
  }
}

function loadFailure(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOENT") return "no such file";
  if (code === "EISDIR") return "it is a directory";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  const message = (err instanceof Error ? err.message : String(err)).replace(/\s+/g, " ");
  // llama.cpp's own loader says only this; the reasons are in its log.
  if (message === "Failed to load model") return "llama.cpp could not load it (a truncated file, or an architecture this llama.cpp build does not know)";
  // node-llama-cpp's GGUF reader trips over headers it cannot parse.
  if (err instanceof TypeError) return `not a readable GGUF file (${message})`;
  return message;
}

/** The request names a model id this engine does not serve. */
export class ModelNotServedError extends LlmEngineError {
  constructor(id: string) {
    super("model_not_served", `model: "${id}" is not served by this node`, true);
  }
}

/** Generation stopped because the caller's AbortSignal fired. */
export class GenerationAbortedError extends LlmEngineError {
  /** @param usage what the request used before it stopped, when it got that far (its account is charged for it). */
  constructor(readonly usage?: { promptTokens: number; completionTokens: number }) {
    super(WIRE.cancelled, "generation was cancelled");
  }
}

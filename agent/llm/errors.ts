/** Errors of the chat engine. `code` travels to the scheduler in CompletionError. */
export class LlmEngineError extends Error {
  constructor(readonly code: string, message: string, readonly retryable = false) {
    super(message);
    this.name = new.target.name;
  }
}

/** The rendered prompt does not fit the context of one sequence. */
export class ContextLengthExceededError extends LlmEngineError {
  constructor(promptTokens: number, contextSize: number) {
    super("context_length_exceeded", `messages: the prompt is ${promptTokens} tokens; this model's context holds ${contextSize}`);
  }
}

/** The request names a model id this engine does not serve. */
export class ModelNotServedError extends LlmEngineError {
  constructor(id: string) {
    super("model_not_served", `model: "${id}" is not served by this node`, true);
  }
}

/** Generation stopped because the caller's AbortSignal fired. */
export class GenerationAbortedError extends LlmEngineError {
  constructor() {
    super("cancelled", "generation was cancelled");
  }
}

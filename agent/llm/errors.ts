/** Errors of the chat engine. `code` travels to the scheduler in CompletionError. */
export class LlmEngineError extends Error {
  constructor(readonly code: string, message: string, readonly retryable = false) {
    super(message);
    this.name = new.target.name;
  }
}

/** The rendered prompt does not fit the context of one sequence. */
export class ContextLengthExceededError extends LlmEngineError {
  private constructor(detail: string) {
    super("context_length_exceeded", `messages: ${detail}`);
  }

  /** The rendered prompt, tokenized, is longer than the context. */
  static tokens(promptTokens: number, contextSize: number): ContextLengthExceededError {
    return new ContextLengthExceededError(`the prompt is ${promptTokens} tokens; this model's context holds ${contextSize}`);
  }

  /** The messages' text is too long to fit even if every token were the vocabulary's longest (it is not tokenized). */
  static text(textBytes: number, contextSize: number, maxTokenBytes: number): ContextLengthExceededError {
    return new ContextLengthExceededError(`the messages hold ${textBytes} bytes of text, more than this model's context of ${contextSize} tokens can hold (its longest token is ${maxTokenBytes} bytes)`);
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

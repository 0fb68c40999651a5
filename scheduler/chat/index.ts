export { validateChatCompletion, type ChatCompletionBody, type ChatValidationOptions } from "./validate.js";
export { completionId, completionBody, chunkBody, usageChunkBody, usage, type Done, type StreamIdentity, type Usage } from "./openai.js";

export { validateChatCompletion, type ChatCompletionBody, type ChatValidationOptions } from "./validate.js";
export { completionId, completionBody, chunkBody, usageChunkBody, usage, type Usage } from "./openai.js";

export { validateChatCompletion, type ChatCompletionBody } from "./validate.js";
export { completionId, completionBody, chunkBody, usageChunkBody, usage, type Usage } from "./openai.js";

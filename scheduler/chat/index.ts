export { validateChatCompletion, type ChatCompletionBody, type ChatValidationOptions } from "./validate.js";
export {
  completionId,
  completionBody,
  chunkBody,
  toolCallId,
  toolCallsDelta,
  usageChunkBody,
  usage,
  type Done,
  type StreamedToolCall,
  type StreamIdentity,
  type Usage,
} from "./openai.js";

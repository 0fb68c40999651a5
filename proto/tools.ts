/**
 * Function calling on the wire, both ways: a conversation's messages (with their calls and the
 * results answering them), the tools a request offers and its tool choice.
 */
import type { ChatMessage, ToolChoice, ToolFunction } from "../core/chat.js";
import type { ChatMessage as WireMessage, ChatMessage__Output } from "./gen/kiln/v1/ChatMessage.js";
import type { CompletionRequest, CompletionRequest__Output } from "./gen/kiln/v1/CompletionRequest.js";

/** The proto messages of a conversation (the scheduler's side). */
export function messagesToProto(messages: readonly ChatMessage[]): WireMessage[] {
  return messages.map((m) => ({
    role: m.role,
    content: m.content,
    ...(m.toolCalls?.length ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })) } : {}),
    ...(m.toolCallId !== undefined ? { tool_call_id: m.toolCallId } : {}),
  }));
}

/** A received message's calls and the call it answers, as the engine takes them (its role is checked by the caller). */
export function toolFieldsFromProto(m: ChatMessage__Output): Pick<ChatMessage, "toolCalls" | "toolCallId"> {
  return {
    ...(m.tool_calls.length > 0 ? { toolCalls: m.tool_calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })) } : {}),
    ...(m.role === "tool" ? { toolCallId: m.tool_call_id } : {}),
  };
}

/** The proto fields of a request's tools (the scheduler's side); nothing without tools. */
export function toolsToProto(r: { tools?: ToolFunction[]; toolChoice?: ToolChoice; parallelToolCalls?: boolean }): Partial<CompletionRequest> {
  if (!r.tools?.length) return {};
  const choice = r.toolChoice ?? "auto";
  return {
    tools: r.tools.map((t) => ({ name: t.name, description: t.description ?? "", parameters: t.parameters ? JSON.stringify(t.parameters) : "" })),
    ...(typeof choice === "object" ? { tool_choice: "function", tool_choice_function: choice.name } : { tool_choice: choice }),
    ...(r.parallelToolCalls !== undefined ? { parallel_tool_calls: r.parallelToolCalls } : {}),
  };
}

/**
 * The tools of a received request (the agent's side), or undefined without any. A choice this agent
 * does not know, or parameters that are not a JSON object, are errors rather than ignored: the client
 * asked for them.
 */
export function toolsFromProto(req: CompletionRequest__Output): { tools: ToolFunction[]; toolChoice: ToolChoice; parallelToolCalls: boolean } | undefined {
  if (req.tools.length === 0) return undefined;
  const tools = req.tools.map((t, i): ToolFunction => {
    if (!t.parameters) return { name: t.name, ...(t.description ? { description: t.description } : {}) };
    const parameters = JSON.parse(t.parameters) as unknown;
    if (typeof parameters !== "object" || parameters === null || Array.isArray(parameters)) throw new TypeError(`tools[${i}].function.parameters: not a JSON object`);
    return { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: parameters as Record<string, unknown> };
  });
  const choice = req.tool_choice;
  let toolChoice: ToolChoice;
  if (choice === "" || choice === "auto" || choice === "required") toolChoice = choice || "auto";
  else if (choice === "function") toolChoice = { name: req.tool_choice_function };
  else throw new TypeError(`tool_choice: unknown choice "${choice}"`);
  return { tools, toolChoice, parallelToolCalls: req.parallel_tool_calls ?? true };
}

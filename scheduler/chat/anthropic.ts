/**
 * Anthropic's Messages API translated to and from the fleet's one request, without I/O: a request
 * (anthropic-schema.ts) becomes the `CompletionRequest` chat completions build (the same conversation
 * of system, user, assistant and tool messages, sampling, tools), and what the fleet answers
 * (`CompletionEvent`s, then `done`) becomes Anthropic's `Message`, or its stream of events
 * (`message_start`, `content_block_*`, `message_delta`, `message_stop`), or its error body.
 *
 * Stop sequences are matched here, in the scheduler: the engine ends a reply on a stop text without
 * saying which one (or whether it was the model's own end), and Anthropic's answer names it. The
 * route cancels the generation on the node when a match is found (routes/messages.ts).
 */
import { randomId } from "../../core/ids.js";
import { checkToolOrder, type ChatMessage, type Sampling, type ToolCall, type ToolCallDelta } from "../../core/chat.js";
import { ERROR_CODES, isErrorCode } from "../../core/error-codes.js";
import { InvalidRequestError, UpstreamError, type ApiError } from "../../core/errors.js";
import { parseBody } from "../../core/schema.js";
import type { CompletionEvent, CompletionRequest } from "../fleet/index.js";
import { CountTokensRequest, IGNORED_ANTHROPIC, MessagesRequest, type CountTokensRequestBody, type MessagesRequestBody } from "./anthropic-schema.js";
import { BUILTIN_MODEL_NAMES, resolveModel, type ModelNames } from "./schema.js";

/** A validated Messages request: the fleet's request and what the answer needs besides. */
export interface AnthropicRequest {
  /** The fleet's request (one choice). */
  request: CompletionRequest;
  /** The name the client sent (an id or an alias), which the answer carries; `request.model` is the canonical id. */
  requestedModel: string;
  stream: boolean;
  /**
   * Sent to the node as stop texts (`sampling.stop`), which it stops at and names in its `done`;
   * matched in the scheduler as well (`StopMatcher`), for a node that lets one through.
   */
  stopSequences: string[];
  /** Top-level members that change nothing here, for `x-kiln-ignored-fields`. */
  ignored: string[];
}

export interface AnthropicValidationOptions {
  /** The names `model` may give (the scheduler's catalog). Default the built-in ids. */
  models?: ModelNames;
}

/** Text blocks of one message, tool result or system prompt are joined with a blank line (each block is a paragraph of its own). */
export const BLOCK_SEPARATOR = "\n\n";

/** `POST /v1/messages`: the body checked and turned into the fleet's request. Every failure is an `InvalidRequestError` naming the field. */
export function validateMessages(body: unknown, options: AnthropicValidationOptions = {}): AnthropicRequest {
  const model = resolveModel(body, options.models ?? BUILTIN_MODEL_NAMES);
  const b = parseBody(MessagesRequest, body);
  const request: CompletionRequest = { model: model ?? b.model, messages: conversation(b), maxTokens: b.max_tokens };
  if (b.temperature !== undefined) request.temperature = b.temperature;
  const sampling: Sampling = {};
  if (b.top_p !== undefined) sampling.topP = b.top_p;
  if (b.top_k !== undefined) sampling.topK = b.top_k;
  const stopSequences = b.stop_sequences?.filter((s) => s.length > 0) ?? [];
  if (stopSequences.length > 0) {
    // the node stops at them (no tokens generated past one, none billed) and names the one it met
    sampling.stop = stopSequences;
    request.nameStop = true;
  }
  if (Object.keys(sampling).length > 0) request.sampling = sampling;
  offerTools(b, request);
  return {
    request,
    requestedModel: b.model,
    stream: b.stream ?? false,
    stopSequences,
    ignored: Object.keys(body as object).filter((k) => IGNORED_ANTHROPIC.has(k)),
  };
}

/**
 * `POST /v1/messages/count_tokens`: the conversation as a Messages request of it would be sent, to be
 * evaluated by a node for one greedy token (the count is the node's: the prompt as the model's chat
 * template renders it, tokenized by the model).
 */
export function validateCountTokens(body: unknown, options: AnthropicValidationOptions = {}): AnthropicRequest {
  const model = resolveModel(body, options.models ?? BUILTIN_MODEL_NAMES);
  const b = parseBody(CountTokensRequest, body);
  const request: CompletionRequest = { model: model ?? b.model, messages: conversation(b), maxTokens: 1, temperature: 0 };
  offerTools(b, request);
  return { request, requestedModel: b.model, stream: false, stopSequences: [], ignored: [] };
}

type Conversation = Pick<CountTokensRequestBody, "system" | "messages">;
type Block = { type: string; text?: string; id?: string; name?: string; input?: Record<string, unknown>; tool_use_id?: string; content?: unknown; is_error?: boolean };

const blocksOf = (content: unknown): Block[] => (typeof content === "string" ? [{ type: "text", text: content }] : (content as Block[]));
/** The text of text blocks (or a string), joined with BLOCK_SEPARATOR; empty blocks add nothing. */
const textOf = (content: unknown): string =>
  blocksOf(content ?? "")
    .filter((b) => b.type === "text" && b.text)
    .map((b) => b.text!)
    .join(BLOCK_SEPARATOR);

const refuse = (field: string, message: string): never => {
  throw new InvalidRequestError("invalid_messages", `${field}: ${message}`, field);
};

/**
 * The fleet's conversation: the system prompt, then each turn (an assistant's `tool_use` blocks as its
 * calls, a user's `tool_result` blocks as tool messages before its text). Anthropic's rule for tools is
 * checked with its own words: each `tool_use` is answered once by a `tool_result` in the next message, a
 * user message, whose results come before its text. Consecutive turns of one role are combined, as
 * Anthropic combines them.
 */
function conversation(b: Conversation): ChatMessage[] {
  const out: ChatMessage[] = [];
  const push = (m: ChatMessage): void => {
    const last = out.at(-1);
    if (last && last.role === m.role && m.role !== "tool" && !last.toolCalls) {
      // appended, not joined anew: a turn of 130,000 parts would copy its text 130,000 times
      last.content = last.content && m.content ? last.content + BLOCK_SEPARATOR + m.content : last.content || m.content;
      if (m.toolCalls) last.toolCalls = m.toolCalls;
      return;
    }
    out.push(m);
  };
  if (b.system !== undefined) push({ role: "system", content: textOf(b.system) });
  // the last assistant turn's calls still to be answered: their ids, and that turn's place
  let pending: { ids: Map<string, boolean>; at: number } | undefined;
  for (const [i, m] of b.messages.entries()) {
    const blocks = blocksOf(m.content);
    if (pending && m.role !== "user")
      refuse(`messages[${i}].role`, `the tool_use blocks of messages[${pending.at}] are answered by tool_result blocks in the next message, a user message`);
    if (m.role === "assistant") {
      const calls: ToolCall[] = [];
      const ids = new Set<string>();
      for (const [j, block] of blocks.entries()) {
        if (block.type !== "tool_use") continue;
        if (ids.has(block.id!)) refuse(`messages[${i}].content[${j}].id`, `${JSON.stringify(block.id)} is the id of an earlier tool_use of this message`);
        ids.add(block.id!);
        calls.push({ id: block.id!, name: block.name!, arguments: JSON.stringify(block.input) });
      }
      push({ role: "assistant", content: textOf(blocks), ...(calls.length > 0 ? { toolCalls: calls } : {}) });
      pending = calls.length > 0 ? { ids: new Map(calls.map((c) => [c.id, false])), at: i } : undefined;
    } else if (m.role === "user") {
      let textSeen = false;
      for (const [j, block] of blocks.entries()) {
        if (block.type !== "tool_result") {
          textSeen = true;
          continue;
        }
        const at = `messages[${i}].content[${j}]`;
        if (textSeen) refuse(at, "tool_result blocks come first in a user message, before its text");
        const id = block.tool_use_id!;
        if (!pending?.ids.has(id)) refuse(`${at}.tool_use_id`, `${JSON.stringify(id)} is not the id of a tool_use in the message before this one`);
        if (pending!.ids.get(id)) refuse(`${at}.tool_use_id`, `the tool_use ${JSON.stringify(id)} is answered twice`);
        pending!.ids.set(id, true);
        const text = textOf(block.content);
        push({ role: "tool", toolCallId: id, content: block.is_error ? (text ? `Error: ${text}` : "Error") : text });
      }
      if (pending) unanswered(pending, `messages[${i}].content`);
      pending = undefined;
      if (textSeen || blocks.length === 0) push({ role: "user", content: textOf(blocks) });
    } else {
      push({ role: "system", content: textOf(blocks) });
    }
  }
  if (pending) unanswered(pending, `messages[${pending.at}].content`);
  // the engine's own rule, which the one above implies; kept as a guard
  const order = checkToolOrder(out);
  if (order) refuse("messages", order.message);
  return out;
}

function unanswered(pending: { ids: Map<string, boolean>; at: number }, field: string): void {
  const id = [...pending.ids].find(([, answered]) => !answered)?.[0];
  if (id !== undefined)
    refuse(field, `the tool_use ${JSON.stringify(id)} of messages[${pending.at}] has no tool_result (each tool_use is answered in the next message, a user message)`);
}

/** `tools` and `tool_choice` onto the fleet's request (none with `tool_choice` none: the model is not shown them). */
function offerTools(b: Pick<CountTokensRequestBody, "tools" | "tool_choice">, request: CompletionRequest): void {
  const tools = b.tools ?? [];
  const names = new Set<string>();
  for (const [i, tool] of tools.entries()) {
    if (names.has(tool.name)) throw new InvalidRequestError("invalid_tools", `tools[${i}].name: ${JSON.stringify(tool.name)} is the name of an earlier tool`, `tools[${i}].name`);
    names.add(tool.name);
  }
  const choice = b.tool_choice as { type: "auto" | "any" | "tool" | "none"; name?: string; disable_parallel_tool_use?: boolean } | undefined;
  if (choice?.type === "tool" && !names.has(choice.name!))
    throw new InvalidRequestError("invalid_tool_choice", `tool_choice.name: ${JSON.stringify(choice.name)} is not one of the tools`, "tool_choice.name");
  if (choice?.type === "any" && tools.length === 0) throw new InvalidRequestError("invalid_tool_choice", 'tool_choice: "any" needs tools', "tool_choice");
  if (tools.length === 0 || choice?.type === "none") return;
  request.tools = tools.map((t) => ({
    name: t.name,
    ...(t.description ? { description: t.description } : {}),
    parameters: t.input_schema,
  }));
  if (choice?.type === "any") request.toolChoice = "required";
  else if (choice?.type === "tool") request.toolChoice = { name: choice.name! };
  if (choice?.disable_parallel_tool_use === true) request.parallelToolCalls = false;
}

// ---------------------------------------------------------------------------------------------
// The answer

/** Anthropic's reasons a reply ended that Kiln gives. */
export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use";

/** How a reply ended: why, the stop sequence that ended it, and what it used. */
export interface End {
  stopReason: StopReason;
  stopSequence: string | null;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens the serving slot's KV cache already held (0 when unknown). */
  cachedTokens: number;
}

/** The end a node's `done` reports: `length` is max_tokens (or the context's end), `tool_calls` tool_use, the rest end_turn. */
export function endOf(done: { finishReason: string; promptTokens: number; completionTokens: number; cachedTokens: number; stopText?: string }): End {
  const stopReason: StopReason =
    done.stopText !== undefined ? "stop_sequence" : done.finishReason === "length" ? "max_tokens" : done.finishReason === "tool_calls" ? "tool_use" : "end_turn";
  return { stopReason, stopSequence: done.stopText ?? null, promptTokens: done.promptTokens, completionTokens: done.completionTokens, cachedTokens: done.cachedTokens };
}

export const messageId = (): string => `msg_${randomId(18)}`;
export const toolUseId = (): string => `toolu_${randomId(18)}`;

/**
 * Anthropic's `usage`: the prompt split into what the slot's KV cache held (`cache_read_input_tokens`)
 * and the rest (`input_tokens`), whose sum is the prompt's tokens; Kiln writes no cache entries of its own
 * (`cache_creation_input_tokens` 0).
 */
export function usageBody(end: Pick<End, "promptTokens" | "completionTokens" | "cachedTokens">) {
  const cached = Math.min(Math.max(end.cachedTokens, 0), end.promptTokens);
  return {
    input_tokens: end.promptTokens - cached,
    output_tokens: end.completionTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    cache_creation: null,
    inference_geo: null,
    output_tokens_details: null,
    server_tool_use: null,
    service_tier: "standard",
    speed: null,
  };
}

/** One server-sent event: its name (`event:`) and its data. */
export interface StreamEvent {
  event: string;
  data: Record<string, unknown>;
}

/** The SSE text of events, each `event:` then `data:`, as Anthropic sends them. */
export const sseText = (events: readonly StreamEvent[]): string => events.map((e) => `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`).join("");

/**
 * Generated text with stop sequences held back: what may be released now, and the stop sequence that
 * ends the reply once one appears (its text and all after it dropped). A suffix that could still become
 * a stop sequence is held until the next text shows it is not. When several appear, the one whose last
 * character came first ends the reply (as a token-by-token matcher would see it).
 */
export class StopMatcher {
  private held = "";

  constructor(private readonly stops: readonly string[]) {}

  push(text: string): { text: string; stop?: string } {
    if (this.stops.length === 0) return { text };
    const s = this.held + text;
    let found: { start: number; end: number; stop: string } | undefined;
    for (const stop of this.stops) {
      const start = s.indexOf(stop);
      if (start < 0) continue;
      const end = start + stop.length;
      if (!found || end < found.end || (end === found.end && start < found.start)) found = { start, end, stop };
    }
    if (found) {
      this.held = "";
      return { text: s.slice(0, found.start), stop: found.stop };
    }
    let keep = 0;
    for (const stop of this.stops)
      for (let k = Math.min(stop.length - 1, s.length); k > keep; k--)
        if (s.endsWith(stop.slice(0, k))) {
          keep = k;
          break;
        }
    this.held = s.slice(s.length - keep);
    return { text: s.slice(0, s.length - keep) };
  }

  /** The text held back (the reply ended without it becoming a stop sequence). */
  flush(): string {
    const text = this.held;
    this.held = "";
    return text;
  }
}

type CollectedBlock = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; arguments: string };

/**
 * One answer being made from the fleet's events: as Anthropic's stream events (`start`, `push` for each
 * event, `finish`) and, for a non-streamed answer, as its `Message` (`message`). Content blocks follow
 * one another: text, then a tool_use for each call as it starts; a block is stopped before the next one
 * starts. Only choice 0 exists (a Messages request has one).
 */
export class AnthropicAnswer {
  readonly id = messageId();
  /** The stop sequence that ended the reply, once one has: later events add nothing. */
  stopped: string | undefined;
  private readonly matcher: StopMatcher;
  private readonly blocks: CollectedBlock[] = [];
  /** The block open now: its index, and for a tool_use the call's place among the calls. */
  private open: { index: number; call?: number } | undefined;
  private opened = 0;
  /** The calls so far, by their place in the reply: each one's block index. */
  private readonly calls: number[] = [];

  constructor(
    private readonly model: string,
    stopSequences: readonly string[],
    /** Streamed: a piece of a call whose block was stopped cannot be sent, and fails the answer. */
    private readonly streaming: boolean,
  ) {
    this.matcher = new StopMatcher(stopSequences);
  }

  /** `message_start` (the message with no content yet; its usage is told by `message_delta`) and a `ping`. */
  start(): StreamEvent[] {
    const usage = { ...usageBody({ promptTokens: 0, completionTokens: 0, cachedTokens: 0 }) };
    return [
      { event: "message_start", data: { type: "message_start", message: { ...this.shell(), content: [], stop_reason: null, stop_sequence: null, usage } } },
      { event: "ping", data: { type: "ping" } },
    ];
  }

  /** The stream events of one fleet event (none once a stop sequence has ended the reply). */
  push(e: CompletionEvent): StreamEvent[] {
    if (e.type !== "text" || e.index !== 0 || this.stopped !== undefined) return [];
    const out: StreamEvent[] = [];
    const released = this.matcher.push(e.text);
    this.text(released.text, out);
    if (released.stop !== undefined) {
      this.stopped = released.stop;
      return out;
    }
    if (e.toolCalls?.length) {
      this.text(this.matcher.flush(), out); // text before a call never becomes a stop sequence
      for (const piece of e.toolCalls) this.piece(piece, out);
    }
    return out;
  }

  /** The events that end the stream: the open block stopped, `message_delta` (why, and the usage), `message_stop`. */
  finish(end: End): StreamEvent[] {
    const out: StreamEvent[] = [];
    if (this.stopped === undefined) this.text(this.matcher.flush(), out);
    this.close(out);
    const { cache_creation_input_tokens, cache_read_input_tokens, input_tokens, output_tokens } = usageBody(end);
    out.push(
      {
        event: "message_delta",
        data: {
          type: "message_delta",
          delta: { stop_reason: end.stopReason, stop_sequence: end.stopSequence, stop_details: null, container: null },
          usage: { input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens_details: null, server_tool_use: null },
        },
      },
      { event: "message_stop", data: { type: "message_stop" } },
    );
    return out;
  }

  /** The whole `Message` (a non-streamed answer). */
  message(end: End) {
    if (this.stopped === undefined) this.text(this.matcher.flush(), []);
    const content = this.blocks.map((b) =>
      b.type === "text" ? { type: "text", text: b.text, citations: null } : { type: "tool_use", id: b.id, name: b.name, input: toolInput(b.arguments), caller: { type: "direct" } },
    );
    return { ...this.shell(), content, stop_reason: end.stopReason, stop_sequence: end.stopSequence, usage: usageBody(end) };
  }

  private shell() {
    return { id: this.id, type: "message", role: "assistant", model: this.model, stop_details: null, container: null, diagnostics: null };
  }

  private text(text: string, out: StreamEvent[]): void {
    if (!text) return;
    if (!this.open || this.open.call !== undefined) {
      this.close(out);
      this.open = { index: this.opened++ };
      this.blocks.push({ type: "text", text: "" });
      out.push({ event: "content_block_start", data: { type: "content_block_start", index: this.open.index, content_block: { type: "text", text: "", citations: null } } });
    }
    (this.blocks[this.open.index] as { text: string }).text += text;
    out.push({ event: "content_block_delta", data: { type: "content_block_delta", index: this.open.index, delta: { type: "text_delta", text } } });
  }

  /**
   * A piece of a call: its first (with the function's name, at the next place) starts a tool_use block;
   * the others add to its input. A piece of a call never started, or starting one past the next place,
   * is dropped (a node's index is not trusted to size anything).
   */
  private piece(d: ToolCallDelta, out: StreamEvent[]): void {
    if (d.name !== undefined && d.index === this.calls.length) {
      this.close(out);
      const index = this.opened++;
      const id = toolUseId();
      this.calls.push(index);
      this.open = { index, call: d.index };
      this.blocks.push({ type: "tool_use", id, name: d.name, arguments: "" });
      out.push({
        event: "content_block_start",
        data: { type: "content_block_start", index, content_block: { type: "tool_use", id, name: d.name, input: {}, caller: { type: "direct" } } },
      });
    } else if (this.calls[d.index] === undefined) return;
    const index = this.calls[d.index]!;
    if (this.open?.index !== index && this.streaming) throw new UpstreamError("agent_error", "the node sent more of a tool call after the next content had begun");
    if (!d.arguments) return;
    (this.blocks[index] as { arguments: string }).arguments += d.arguments;
    out.push({ event: "content_block_delta", data: { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: d.arguments } } });
  }

  private close(out: StreamEvent[]): void {
    if (!this.open) return;
    out.push({ event: "content_block_stop", data: { type: "content_block_stop", index: this.open.index } });
    this.open = undefined;
  }
}

/** A call's input from its arguments' JSON text: an object, or {} when the reply was cut before the arguments were whole. */
function toolInput(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text || "{}");
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

/** Anthropic's error types that Kiln answers with. */
export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "api_error"
  | "timeout_error"
  | "overloaded_error";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: AnthropicErrorType; message: string };
  request_id: string | null;
}

/**
 * A Kiln error's status and type in Anthropic's terms: 400, 401, 403, 404, 413 and 429 as they are;
 * 503 (no capacity now) as 529 `overloaded_error`; 504 as `timeout_error`; any other 5xx as 500
 * `api_error`. A model no catalog entry names is Anthropic's 404 `not_found_error`.
 */
export function anthropicStatus(status: number, code: string): { status: number; type: AnthropicErrorType } {
  if (code === "model_not_found") return { status: 404, type: "not_found_error" };
  switch (status) {
    case 401:
      return { status, type: "authentication_error" };
    case 403:
      return { status, type: "permission_error" };
    case 404:
      return { status, type: "not_found_error" };
    case 413:
      return { status, type: "request_too_large" };
    case 429:
      return { status, type: "rate_limit_error" };
    case 503:
      return { status: 529, type: "overloaded_error" };
    case 504:
      return { status, type: "timeout_error" };
  }
  if (status >= 500) return { status: 500, type: "api_error" };
  return { status: status >= 400 ? status : 400, type: "invalid_request_error" };
}

/** The response header carrying Kiln's own error code beside Anthropic's body. */
export const ERROR_CODE_HEADER = "x-kiln-error-code";

/**
 * An error as Anthropic answers it: its status, `{"type": "error", "error": {type, message}, "request_id"}`,
 * and headers (the error's own, such as Retry-After; Kiln's code; `x-should-retry`, which Anthropic's
 * SDKs follow, from whether the code is worth trying again).
 */
export function anthropicError(err: ApiError, requestId: string | null): { status: number; body: AnthropicErrorBody; headers: Record<string, string> } {
  const { status, type } = anthropicStatus(err.status, err.code);
  const headers: Record<string, string> = { ...err.headers, [ERROR_CODE_HEADER]: err.code };
  if (isErrorCode(err.code)) headers["x-should-retry"] = String(ERROR_CODES[err.code].retryable);
  return { status, body: errorBody(type, err.message, requestId), headers };
}

/** The body of an error that is Kiln's fault (not an `ApiError`): 500 `api_error`, the details left to the log. */
export const internalErrorBody = (requestId: string | null): AnthropicErrorBody => errorBody("api_error", "internal error; the request id is in request-id", requestId);

const errorBody = (type: AnthropicErrorType, message: string, requestId: string | null): AnthropicErrorBody => ({ type: "error", error: { type, message }, request_id: requestId });

/** The stream's `error` event: what ends a stream that fails after it began. */
export const errorEvent = (body: AnthropicErrorBody): StreamEvent => ({ event: "error", data: body as unknown as Record<string, unknown> });

export type { MessagesRequestBody };

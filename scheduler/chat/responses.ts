/**
 * The answers of `POST /v1/responses` (OpenAI's Responses API) from what the fleet reports: the
 * `Response` object, and the typed server-sent events of a streamed one. Pure: `ResponseWriter` is
 * given the fleet's events in order (text, pieces of function calls, done) and returns the Responses
 * events each one makes, numbered; the non-streamed answer is the response its `done` completes.
 *
 * A stream: `response.created`, `response.in_progress`; for text `response.output_item.added` (a
 * message), `response.content_part.added`, `response.output_text.delta`…, then `.output_text.done`,
 * `.content_part.done`, `.output_item.done`; for each call `response.output_item.added` (a
 * function_call), `response.function_call_arguments.delta`…, `.function_call_arguments.done`,
 * `.output_item.done`; then `response.completed` (or `response.incomplete` at max_output_tokens). A
 * failure after the stream began: `error`, then `response.failed`.
 */
import { randomId } from "../../core/ids.js";
import type { ToolCallDelta } from "../../core/chat.js";
import { toolCallId, type Done } from "./openai.js";
import type { ResponseEcho } from "./responses-schema.js";

/** `resp_` and 48 hex digits, as OpenAI's ids look. */
export const responseId = (): string => `resp_${randomId(24, "hex")}`;
const itemId = (prefix: "msg" | "fc"): string => `${prefix}_${randomId(24, "hex")}`;

/** One answer's identity: its id, creation time (Unix seconds) and the model name the client sent. */
export interface ResponseIdentity {
  id: string;
  createdAt: number;
  model: string;
}

export interface ResponseUsageBody {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/**
 * `usage` of a Response: the prompt's tokens (those the node's KV cache held among them) and the
 * generated ones. `cache_write_tokens` (OpenAI's document requires it) is 0: Kiln has no prompt cache
 * that a request writes to apart from its slot's KV cache, which every prompt fills.
 */
export function responseUsage(done: Pick<Done, "promptTokens" | "completionTokens" | "cachedTokens">): ResponseUsageBody {
  return {
    input_tokens: done.promptTokens,
    input_tokens_details: { cached_tokens: done.cachedTokens, cache_write_tokens: 0 },
    output_tokens: done.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: done.promptTokens + done.completionTokens,
  };
}

type ItemStatus = "in_progress" | "completed" | "incomplete";
interface OutputText {
  type: "output_text";
  text: string;
  annotations: never[];
  logprobs: never[];
}
export interface MessageItem {
  id: string;
  type: "message";
  role: "assistant";
  status: ItemStatus;
  content: OutputText[];
}
export interface FunctionCallItem {
  id: string;
  type: "function_call";
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}
export type OutputItem = MessageItem | FunctionCallItem;

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

/** How a response ended, beyond its output: its usage, why it is incomplete, or its error. */
export interface ResponseEnd {
  status: ResponseStatus;
  usage?: ResponseUsageBody;
  incomplete?: "max_output_tokens";
  error?: { code: "server_error"; message: string };
  completedAt?: number;
}

/** The `Response` object: the request's settings given back, the output items, the status and, once ended, the usage. */
export function responseBody(a: ResponseIdentity, echo: ResponseEcho, output: readonly OutputItem[], end: ResponseEnd) {
  const text = output.flatMap((item) => (item.type === "message" ? item.content.map((c) => c.text) : [])).join("");
  return {
    id: a.id,
    object: "response" as const,
    created_at: a.createdAt,
    status: end.status,
    ...(end.completedAt !== undefined ? { completed_at: end.completedAt } : {}),
    background: false,
    error: end.error ?? null,
    incomplete_details: end.incomplete ? { reason: end.incomplete } : null,
    instructions: echo.instructions,
    max_output_tokens: echo.maxOutputTokens,
    metadata: echo.metadata,
    model: a.model,
    output: output.map((item) => structuredClone(item)),
    output_text: text,
    parallel_tool_calls: echo.parallelToolCalls,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: echo.temperature,
    text: { format: echo.format, verbosity: "medium" as const },
    tool_choice: echo.toolChoice,
    tools: echo.tools,
    top_p: echo.topP,
    truncation: "disabled" as const,
    ...(end.usage ? { usage: end.usage } : {}),
    ...(echo.user !== undefined ? { user: echo.user } : {}),
    ...(echo.safetyIdentifier !== undefined ? { safety_identifier: echo.safetyIdentifier } : {}),
    ...(echo.promptCacheKey !== undefined ? { prompt_cache_key: echo.promptCacheKey } : {}),
  };
}

export type ResponseObject = ReturnType<typeof responseBody>;

/** One Responses stream event: its type, its sequence number and its members. */
export type ResponseEvent = { type: string; sequence_number: number } & Record<string, unknown>;

/**
 * The Responses events of one generation, from the fleet's events in order. Calls open in order: a
 * piece of a call never opened, or one opening past the next place (an agent's index is not trusted to
 * size an array), is dropped, as on the chat route.
 */
export class ResponseWriter {
  private sequence = 0;
  private readonly output: OutputItem[] = [];
  /** The item being written: the last of `output`, until it is closed. */
  private open: OutputItem | undefined;
  /** The calls so far, by the index the agent gives them. */
  private readonly calls: FunctionCallItem[] = [];
  private ended = false;

  constructor(
    private readonly a: ResponseIdentity,
    private readonly echo: ResponseEcho,
  ) {}

  private event(type: string, members: Record<string, unknown>): ResponseEvent {
    return { type, sequence_number: this.sequence++, ...members };
  }

  private snapshot(end: ResponseEnd): ResponseObject {
    return responseBody(this.a, this.echo, this.output, end);
  }

  /** `response.created` and `response.in_progress`. */
  start(): ResponseEvent[] {
    return [
      this.event("response.created", { response: this.snapshot({ status: "in_progress" }) }),
      this.event("response.in_progress", { response: this.snapshot({ status: "in_progress" }) }),
    ];
  }

  /** The events of a piece of text and the pieces of calls generated after it (one fleet `text` event). */
  generated(text: string, toolCalls: readonly ToolCallDelta[] = []): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (text) {
      if (this.open?.type !== "message") events.push(...this.close("completed"), ...this.openMessage());
      const message = this.open as MessageItem;
      message.content[0]!.text += text;
      events.push(this.event("response.output_text.delta", { item_id: message.id, output_index: this.output.length - 1, content_index: 0, delta: text, logprobs: [] }));
    }
    for (const d of toolCalls) {
      if (d.name !== undefined && d.index === this.calls.length) {
        events.push(...this.close("completed"));
        const call: FunctionCallItem = { id: itemId("fc"), type: "function_call", call_id: toolCallId(), name: d.name, arguments: "", status: "in_progress" };
        this.calls.push(call);
        this.output.push(call);
        this.open = call;
        events.push(this.event("response.output_item.added", { output_index: this.output.length - 1, item: structuredClone(call) }));
      }
      const call = this.calls[d.index];
      if (!call || !d.arguments) continue;
      if (call !== this.open) continue; // a piece of a call already closed: calls are generated one after another
      call.arguments += d.arguments;
      events.push(this.event("response.function_call_arguments.delta", { item_id: call.id, output_index: this.output.length - 1, delta: d.arguments }));
    }
    return events;
  }

  /** The events that end a generation: the open item closed, then `response.completed` (or `.incomplete`). */
  done(done: Done): ResponseEvent[] {
    const incomplete = done.finishReason === "length";
    const events = this.output.length === 0 ? [...this.openMessage()] : []; // no output at all: an empty message, as the non-streamed answer has
    events.push(...this.close(incomplete ? "incomplete" : "completed"));
    this.ended = true;
    const end: ResponseEnd = incomplete
      ? { status: "incomplete", incomplete: "max_output_tokens", usage: responseUsage(done) }
      : { status: "completed", usage: responseUsage(done), completedAt: Math.floor(Date.now() / 1000) };
    events.push(this.event(incomplete ? "response.incomplete" : "response.completed", { response: this.snapshot(end) }));
    return events;
  }

  /** The response `done` completes, as the non-streamed answer gives it (the events of `done` made first). */
  final(done: Done): ResponseObject {
    const last = this.done(done).at(-1)!;
    return last.response as ResponseObject;
  }

  /** A failure after the stream began: the API's `error` event, then `response.failed` with what was generated. */
  fail(error: { code: string; message: string }): ResponseEvent[] {
    if (this.ended) return [];
    this.ended = true;
    if (this.open) this.open.status = "incomplete";
    this.open = undefined;
    return [
      this.event("error", { code: error.code, message: error.message, param: null }),
      this.event("response.failed", { response: this.snapshot({ status: "failed", error: { code: "server_error", message: error.message } }) }),
    ];
  }

  private openMessage(): ResponseEvent[] {
    const message: MessageItem = { id: itemId("msg"), type: "message", role: "assistant", status: "in_progress", content: [] };
    this.output.push(message);
    this.open = message;
    const index = this.output.length - 1;
    const added = this.event("response.output_item.added", { output_index: index, item: structuredClone(message) });
    message.content.push({ type: "output_text", text: "", annotations: [], logprobs: [] });
    return [added, this.event("response.content_part.added", { item_id: message.id, output_index: index, content_index: 0, part: structuredClone(message.content[0]!) })];
  }

  /** The open item's closing events, with `status` as its final one. */
  private close(status: ItemStatus): ResponseEvent[] {
    const item = this.open;
    if (!item) return [];
    this.open = undefined;
    item.status = status;
    const index = this.output.indexOf(item);
    if (item.type === "function_call")
      return [
        this.event("response.function_call_arguments.done", { item_id: item.id, output_index: index, name: item.name, arguments: item.arguments }),
        this.event("response.output_item.done", { output_index: index, item: structuredClone(item) }),
      ];
    const part = item.content[0]!;
    return [
      this.event("response.output_text.done", { item_id: item.id, output_index: index, content_index: 0, text: part.text, logprobs: [] }),
      this.event("response.content_part.done", { item_id: item.id, output_index: index, content_index: 0, part: structuredClone(part) }),
      this.event("response.output_item.done", { output_index: index, item: structuredClone(item) }),
    ];
  }
}

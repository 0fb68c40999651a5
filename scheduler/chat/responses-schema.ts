/**
 * `POST /v1/responses` (OpenAI's Responses API) as one zod schema, and its translation into the
 * fleet's request: the same `CompletionRequest` the chat route builds (instructions and input items
 * become chat messages, `function_call` items an assistant's tool calls, `function_call_output` items
 * tool messages; `max_output_tokens`, `temperature`, `top_p`, function `tools`, `tool_choice`,
 * `parallel_tool_calls` and `text.format` the chat request's own fields), so the fleet, limits,
 * quotas, usage ledger and agent see nothing new. Pure: no I/O.
 *
 * A field is honoured or refused with a 400 naming it: built-in tools, images and files, `reasoning`,
 * `background`, `include`, `previous_response_id`, `conversation`, `store: true` (nothing is stored),
 * `prompt` templates and `truncation: "auto"` are refused; unknown members pass and are listed in
 * `x-kiln-ignored-fields`, as on the chat route. Failures are `InvalidRequestError`s naming the
 * field's path (`input[2].content[0].type`).
 */
import { z } from "zod";
import { checkToolOrder, type ChatMessage, type ResponseFormat, type ToolChoice, type ToolFunction } from "../../core/chat.js";
import type { ErrorCode } from "../../core/error-codes.js";
import { InvalidRequestError } from "../../core/errors.js";
import { checkJsonSchema, FUNCTION_NAME, MAX_SCHEMA_COUNT } from "../../core/json-schema.js";
import { issueCode, parseBody } from "../../core/schema.js";
import { describeValue } from "../../core/validate.js";
import type { CompletionRequest } from "../fleet/index.js";
import { BUILTIN_MODEL_NAMES, jsonTextOf, MAX_TOOLS, present, refuseFirst, resolveModel, ToolParameters, type ModelNames } from "./schema.js";

/** Most `metadata` pairs, and the longest key and value (OpenAI's limits). */
export const MAX_METADATA_PAIRS = 16;
export const MAX_METADATA_KEY = 64;
export const MAX_METADATA_VALUE = 512;
/** Longest `user`, `safety_identifier` and `prompt_cache_key` (OpenAI documents 64 for the first two). */
export const MAX_IDENTIFIER = 256;
/** Longest call id of a `function_call` or `function_call_output` item. */
export const MAX_CALL_ID = 256;

const functionName = () => z.string({ error: "a name of 1 to 64 letters, digits, _ or -" }).regex(FUNCTION_NAME);
const callId = () =>
  z
    .string({ error: `a string of 1 to ${MAX_CALL_ID} characters` })
    .min(1)
    .max(MAX_CALL_ID);

const jsonText = jsonTextOf("invalid_input");

/** A text part of a message or of a function's output; image, file and audio parts are refused. */
const TextPart = refuseFirst(
  (part) =>
    part.type === "input_text" || part.type === "output_text"
      ? undefined
      : {
          path: ["type"],
          code: "unsupported_content",
          message: `content parts of type ${describeValue(part.type)} are not supported (no image, file or audio input); only "input_text" (and "output_text" in an assistant's message)`,
        },
  z.looseObject({ type: z.enum(["input_text", "output_text"]), text: z.string({ error: "a string" }) }, { error: "a content part object" }),
).meta({ description: 'A text part: "input_text", or "output_text" in an earlier assistant message. Image, file and audio parts are refused with 400 unsupported_content.' });

const MESSAGE_ROLES = ["user", "assistant", "system", "developer"] as const;
const InputMessage = z.looseObject(
  {
    type: z.literal("message"),
    role: z.enum(MESSAGE_ROLES, { error: `one of ${MESSAGE_ROLES.join(", ")}` }),
    content: z.union([z.string(), z.array(TextPart)], { error: "a string or an array of content parts" }),
  },
  { error: "a message object" },
);

const FunctionCallItem = z.looseObject(
  {
    type: z.literal("function_call"),
    call_id: callId().meta({ description: "The call's id, which its function_call_output names." }),
    name: functionName(),
    arguments: jsonText,
  },
  { error: "a function_call object" },
);

const FunctionCallOutputItem = z.looseObject(
  {
    type: z.literal("function_call_output"),
    call_id: callId(),
    output: z.union([z.string(), z.array(TextPart)], { error: "a string or an array of content parts" }),
  },
  { error: "a function_call_output object" },
);

const ITEM_TYPES = ["message", "function_call", "function_call_output"] as const;

/** An input item: a message (its `type` may be left out), a function call of an earlier turn, or a call's output. */
const InputItem = z
  .preprocess(
    (value, ctx) => {
      if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
      const item = value as Record<string, unknown>;
      if (item.type === undefined && item.role !== undefined) return { ...item, type: "message" }; // EasyInputMessage
      if (!(ITEM_TYPES as readonly unknown[]).includes(item.type)) {
        const what = item.type === "item_reference" ? " (an item of a stored response: nothing is stored)" : "";
        ctx.addIssue({
          code: "custom",
          path: ["type"],
          message: `items of type ${describeValue(item.type)} are not supported${what}; only message, function_call and function_call_output`,
          params: issueCode("unsupported_parameter"),
          input: item.type,
        });
      }
      return value;
    },
    z.discriminatedUnion("type", [InputMessage, FunctionCallItem, FunctionCallOutputItem], { error: "an input item object" }),
  )
  .meta({ description: "A message (role user, assistant, system or developer; text content), a function_call of an earlier turn, or a function_call_output answering it." });

const FunctionParameters = ToolParameters;

const FunctionTool = refuseFirst(
  (t) =>
    t.type === "function"
      ? undefined
      : { path: ["type"], code: "unsupported_parameter", message: `tools of type ${describeValue(t.type)} are not supported (Kiln runs no built-in tools); only "function"` },
  z.looseObject(
    {
      type: z.literal("function"),
      name: functionName(),
      description: z.string({ error: "a string" }).nullish(),
      parameters: FunctionParameters.nullish().meta({
        description: "JSON Schema of the arguments (type object at the root); they are generated under a grammar from it, so they always parse and match it.",
      }),
      strict: z.boolean({ error: "a boolean" }).nullish().meta({ description: "The arguments are always held to the schema, strict or not." }),
    },
    { error: "a tool object" },
  ),
);

const TOOL_CHOICES = 'one of "none", "auto", "required", {"type": "function", "name"} or {"type": "allowed_tools", "mode", "tools"}';
const ToolChoiceObject = refuseFirst(
  (c) =>
    c.type === "function" || c.type === "allowed_tools"
      ? undefined
      : { path: ["type"], code: "unsupported_parameter", message: `${describeValue(c.type)} is not supported (Kiln runs no built-in tools); only "function" and "allowed_tools"` },
  z.discriminatedUnion(
    "type",
    [
      z.looseObject({ type: z.literal("function"), name: functionName() }),
      z.looseObject({
        type: z.literal("allowed_tools"),
        mode: z.enum(["auto", "required"], { error: 'one of "auto", "required"' }),
        tools: z
          .array(z.looseObject({ type: z.literal("function", { error: '"function"' }), name: functionName() }, { error: 'an object {"type": "function", "name"}' }), {
            error: "an array of tools",
          })
          .min(1)
          .max(MAX_TOOLS),
      }),
    ],
    { error: TOOL_CHOICES },
  ),
);
// the object first: a string fails it at its root, so the enum's failure is the one reported (core/schema.ts)
const ToolChoiceField = z.union([ToolChoiceObject, z.enum(["none", "auto", "required"], { error: TOOL_CHOICES })], { error: TOOL_CHOICES });

/** `text.format.schema`: the JSON Schema subset a grammar can hold the output to (core/json-schema.ts). */
const OutputSchema = z.record(z.string(), z.unknown(), { error: "a JSON Schema object" }).superRefine((schema, ctx) => {
  const problem = checkJsonSchema(schema);
  if (problem) ctx.addIssue({ code: "custom", path: problem.path ? [problem.path] : [], message: problem.message, params: issueCode("invalid_response_format"), input: schema });
});

const TextFormat = z.discriminatedUnion(
  "type",
  [
    z.looseObject({ type: z.literal("text") }),
    z.looseObject({ type: z.literal("json_object") }),
    z.looseObject({
      type: z.literal("json_schema"),
      name: functionName(),
      schema: OutputSchema.meta({
        description: `JSON Schema: type, properties (all required, as OpenAI's strict mode), additionalProperties, items, prefixItems, enum, const, oneOf/anyOf, $defs/$ref, format date/time/date-time, and min/max counts up to ${MAX_SCHEMA_COUNT}. Other keywords are refused with 400 invalid_response_format.`,
      }),
      description: z.string({ error: "a string" }).nullish(),
      strict: z.boolean({ error: "a boolean" }).nullish().meta({ description: "The output is always held to the schema, strict or not." }),
    }),
  ],
  { error: 'an object with type "text", "json_object" or "json_schema"' },
);

const nullable = <S extends z.ZodType>(schema: S, description: string) => schema.nullish().meta({ description });
const numberIn = (min: number, max: number, description: string) =>
  nullable(
    z
      .number({ error: `a number from ${min} to ${max}` })
      .min(min)
      .max(max),
    description,
  );
const identifier = (description: string) =>
  z
    .string({ error: `a string of at most ${MAX_IDENTIFIER} characters` })
    .max(MAX_IDENTIFIER)
    .optional()
    .meta({ description });
/** A field this service refuses when it is set (described so in the document). */
const refused = (description: string) =>
  z
    .unknown()
    .optional()
    .meta({ description: `Not supported: refused with 400 unsupported_parameter when set. ${description}` });

const Metadata = z.record(z.string(), z.string({ error: "a string" }), { error: "an object of strings" }).superRefine((m, ctx) => {
  const issue = (path: string[], message: string) =>
    ctx.addIssue({ code: "custom", path, message, params: { code: "invalid_metadata" as ErrorCode, param: "metadata" }, input: m });
  const keys = Object.keys(m);
  if (keys.length > MAX_METADATA_PAIRS) issue([], `at most ${MAX_METADATA_PAIRS} pairs, got ${keys.length}`);
  for (const key of keys) {
    if (key.length > MAX_METADATA_KEY) issue([], `a key of ${key.length} characters: at most ${MAX_METADATA_KEY}`);
    else if (m[key]!.length > MAX_METADATA_VALUE) issue([key], `a value of ${m[key]!.length} characters: at most ${MAX_METADATA_VALUE}`);
  }
});

const Fields = {
  model: z.string({ error: "a string" }).meta({ description: "A model of GET /v1/models: its id, or one of its aliases. The answer's model is the name sent." }),
  input: z
    .union([z.string(), z.array(InputItem).min(1, { error: "at least one item" })], { error: "a string or an array of input items" })
    .meta({ description: "The conversation: a user message's text, or items (messages, function_call and function_call_output)." }),
  instructions: nullable(z.string({ error: "a string" }), "A system message put before the input."),
  max_output_tokens: nullable(
    z.int({ error: "an integer of at least 1" }).min(1),
    "Most tokens to generate; default the scheduler's --default-max-tokens, and never more than the context has left. Reaching it: status incomplete.",
  ),
  temperature: numberIn(0, 2, "Sampling temperature; 0 is greedy. Default 1."),
  top_p: numberIn(0, 1, "Nucleus sampling: the smallest set of tokens whose probabilities add up to top_p."),
  tools: nullable(
    z.array(FunctionTool, { error: "an array of tools" }).max(MAX_TOOLS, { error: `at most ${MAX_TOOLS} tools` }),
    "Function tools (type function) the model may call; a call's name and arguments are generated under grammars. Built-in tools (web_search, file_search, computer_use, code_interpreter, image_generation, mcp, shell, custom…) are refused.",
  ),
  tool_choice: nullable(
    ToolChoiceField,
    '"auto" (default): the model decides; "none": it answers in text and is not shown the tools; "required": it calls one at least; {"type": "function", "name"}: it calls that one; {"type": "allowed_tools", "mode", "tools"}: it is shown only those.',
  ),
  parallel_tool_calls: nullable(z.boolean({ error: "a boolean" }), "Whether one reply may hold several calls (default true)."),
  text: nullable(
    z.looseObject(
      {
        format: TextFormat.nullish().meta({
          description:
            'Output held to JSON by a grammar: {"type": "json_object"}, or {"type": "json_schema", "name", "schema", "strict"} (the path response_format takes); "text" is the default.',
        }),
        verbosity: z
          .enum(["low", "medium", "high"], { error: 'one of "low", "medium", "high"' })
          .nullish()
          .meta({ description: '"medium" (the default) only; others are refused.' }),
      },
      { error: "an object" },
    ),
    "The output's format.",
  ),
  metadata: nullable(
    Metadata,
    `Up to ${MAX_METADATA_PAIRS} string pairs (keys up to ${MAX_METADATA_KEY} characters, values up to ${MAX_METADATA_VALUE}), given back in the response.`,
  ),
  user: identifier("Given back in the response; no other use."),
  safety_identifier: identifier("Given back in the response; no other use."),
  prompt_cache_key: identifier("Given back in the response; an account's prompts share a node's KV cache by their prefix whatever the key."),
  stream: nullable(z.boolean({ error: "a boolean" }), "Server-sent events: response.created … response.completed."),
  stream_options: nullable(
    z.looseObject({ include_obfuscation: z.boolean({ error: "a boolean" }).nullish() }, { error: "an object" }),
    "include_obfuscation: true is refused (no obfuscation padding is sent).",
  ),
  store: nullable(z.boolean({ error: "a boolean" }), "Responses are not stored: true is refused (false and absent are accepted; the answer's store is false)."),
  background: nullable(z.boolean({ error: "a boolean" }), "true is refused: every response is answered while the request is open."),
  include: nullable(z.array(z.string({ error: "a string" }), { error: "an array of strings" }), "Only an empty list is accepted: nothing extra can be included."),
  reasoning: nullable(
    z.looseObject(
      { effort: z.string({ error: "a string" }).nullish(), summary: z.string({ error: "a string" }).nullish(), generate_summary: z.string({ error: "a string" }).nullish() },
      { error: "an object" },
    ),
    'Kiln runs no reasoning mode: an effort other than null or "none", or a summary, is refused.',
  ),
  truncation: nullable(z.enum(["auto", "disabled"], { error: 'one of "auto", "disabled"' }), '"disabled" only: a prompt longer than the context is a 400 context_length_exceeded.'),
  prompt_cache_retention: nullable(z.enum(["in-memory", "24h"], { error: 'one of "in-memory", "24h"' }), '"in-memory" only: a node keeps its KV cache in memory.'),
  service_tier: nullable(z.string({ error: "a string" }), 'The account\'s tier applies: only "auto" and "default" are accepted.'),
  top_logprobs: nullable(z.int({ error: "an integer" }), "0 only: log probabilities are not given on this route."),
  previous_response_id: refused("Nothing is stored to continue from: send the whole conversation in input."),
  conversation: refused("Conversations are not stored."),
  prompt: refused("Stored prompt templates."),
  context_management: refused("Server-side compaction."),
};

/** Members accepted with no effect beyond being given back: listed in x-kiln-ignored-fields, like unknown ones. */
export const RESPONSES_IGNORED_KNOWN: ReadonlySet<string> = new Set(["prompt_cache_key", "safety_identifier", "user"]);

function refuseUnsupported(b: z.infer<typeof Shape>, ctx: z.RefinementCtx): void {
  const refuse = (path: (string | number)[], message: string, code: ErrorCode = "unsupported_parameter"): void => {
    ctx.addIssue({ code: "custom", path, message, params: issueCode(code), input: undefined });
  };
  if (b.store === true) refuse(["store"], "responses are not stored by this service; send store: false (or leave it out) and the whole conversation in input");
  if (present(b.previous_response_id)) refuse(["previous_response_id"], "responses are not stored by this service, so none can be continued; send the whole conversation in input");
  if (present(b.conversation)) refuse(["conversation"], "conversations are not stored by this service");
  if (present(b.prompt)) refuse(["prompt"], "stored prompt templates are not supported");
  if (present(b.context_management)) refuse(["context_management"], "server-side compaction is not supported");
  if (b.background === true) refuse(["background"], "background responses are not supported: each is answered while its request is open");
  if (b.include && b.include.length > 0) refuse(["include"], `${describeValue(b.include[0])} cannot be included; only an empty list is accepted`);
  if (b.reasoning) {
    if (present(b.reasoning.effort) && b.reasoning.effort !== "none")
      refuse(["reasoning", "effort"], 'the models served here have no reasoning mode Kiln controls; only null or "none"');
    for (const field of ["summary", "generate_summary"] as const) if (present(b.reasoning[field])) refuse(["reasoning", field], "no reasoning summary is produced");
  }
  if (b.truncation === "auto") refuse(["truncation"], 'items are never dropped: only "disabled" (a prompt longer than the context is a 400 context_length_exceeded)');
  if (b.prompt_cache_retention === "24h") refuse(["prompt_cache_retention"], 'a node keeps its KV cache in memory: only "in-memory"');
  if (present(b.service_tier) && b.service_tier !== "auto" && b.service_tier !== "default")
    refuse(["service_tier"], `${describeValue(b.service_tier)} is not offered; the account's tier applies`);
  if (present(b.top_logprobs) && b.top_logprobs !== 0) refuse(["top_logprobs"], "log probabilities are not given on this route; only 0");
  if (b.stream_options?.include_obfuscation === true) refuse(["stream_options", "include_obfuscation"], "no obfuscation padding is sent; only false");
  if (present(b.text?.verbosity) && b.text?.verbosity !== "medium") refuse(["text", "verbosity"], 'the length of the output is not steered; only "medium" (the default)');
  checkTools(b, ctx, refuse);
}

/** Tools against the rest of the request: unique names, a choice that names them (or needs them), no JSON format beside them. */
function checkTools(b: z.infer<typeof Shape>, ctx: z.RefinementCtx, refuse: (path: (string | number)[], message: string, code?: ErrorCode) => void): void {
  const tools = b.tools ?? [];
  const names = new Set<string>();
  for (const [i, tool] of tools.entries()) {
    if (names.has(tool.name)) refuse(["tools", i, "name"], `${JSON.stringify(tool.name)} is the name of an earlier tool`, "invalid_tools");
    names.add(tool.name);
  }
  const choice = b.tool_choice;
  if (typeof choice === "object" && choice !== null) {
    if (choice.type === "function" && !names.has(choice.name)) refuse(["tool_choice", "name"], `${JSON.stringify(choice.name)} is not one of the tools`, "invalid_tool_choice");
    if (choice.type === "allowed_tools")
      for (const [i, t] of choice.tools.entries())
        if (!names.has(t.name)) refuse(["tool_choice", "tools", i, "name"], `${JSON.stringify(t.name)} is not one of the tools`, "invalid_tool_choice");
  } else if (choice === "required" && tools.length === 0) refuse(["tool_choice"], '"required" needs tools', "invalid_tool_choice");
  if (tools.length === 0 || choice === "none") return;
  const format = b.text?.format?.type;
  if (format === "json_object" || format === "json_schema") refuse(["text", "format"], "not supported together with tools (a call's arguments are held to its parameters)");
}

const Shape = z.looseObject(Fields);

/** The Responses API's request (unknown members pass through). */
export const ResponsesRequest = Shape.superRefine(refuseUnsupported).meta({
  id: "ResponseCreateRequest",
  description: "OpenAI's Responses API request; unknown members are accepted and listed in the x-kiln-ignored-fields response header.",
});

/** The members the schema knows. */
export const RESPONSES_KNOWN_FIELDS: ReadonlySet<string> = new Set(Object.keys(Fields));

/** A function tool as a Response gives it back. */
export interface FunctionToolBody {
  type: "function";
  name: string;
  description: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean | null;
}

/** What a Response object repeats of its request (OpenAI's Response echoes these). */
export interface ResponseEcho {
  instructions: string | null;
  maxOutputTokens: number | null;
  metadata: Record<string, string>;
  parallelToolCalls: boolean;
  temperature: number;
  topP: number;
  tools: FunctionToolBody[];
  toolChoice: unknown;
  format: Record<string, unknown>;
  user?: string;
  safetyIdentifier?: string;
  promptCacheKey?: string;
}

/** A validated Responses request: the fleet's request (as the chat route builds it) and what its answer repeats. */
export interface ResponsesBody extends CompletionRequest {
  /** The name the client sent (an id or an alias), which the answer carries; `model` is the canonical id. */
  requestedModel: string;
  stream: boolean;
  /** Always false: a Response carries its usage itself. */
  includeUsage: boolean;
  /** Top-level members this service does not know (or knows and has no use for), in the order sent. */
  ignored: string[];
  echo: ResponseEcho;
}

export interface ResponsesValidationOptions {
  /** `max_output_tokens` when the request gives none (the agent also caps it at what the context has left). Default: none. */
  defaultMaxTokens?: number;
  /** The names `model` may give (the scheduler's catalog). Default the built-in ids. */
  models?: ModelNames;
}

type Item = Exclude<z.infer<typeof Shape>["input"], string>[number];

const partsText = (content: string | { text: string }[]): string => (typeof content === "string" ? content : content.map((p) => p.text).join(""));

/**
 * The input items as chat messages: `instructions` first (a system message), a message's text parts
 * joined, `developer` read as `system`, consecutive `function_call` items the tool calls of one
 * assistant message (the assistant's text before them included), each `function_call_output` a tool
 * message. `from[i]`: the index of the item message `i` starts with (-1: the instructions).
 */
export function inputMessages(instructions: string | null | undefined, input: string | Item[]): { messages: ChatMessage[]; from: number[] } {
  const messages: ChatMessage[] = [];
  const from: number[] = [];
  const push = (m: ChatMessage, index: number) => {
    messages.push(m);
    from.push(index);
  };
  if (present(instructions)) push({ role: "system", content: instructions! }, -1);
  if (typeof input === "string") {
    push({ role: "user", content: input }, 0);
    return { messages, from };
  }
  for (const [index, item] of input.entries()) {
    if (item.type === "message") {
      push({ role: item.role === "developer" ? "system" : item.role, content: partsText(item.content) }, index);
    } else if (item.type === "function_call") {
      const last = messages.at(-1);
      const call = { id: item.call_id, name: item.name, arguments: item.arguments };
      if (last?.role === "assistant") (last.toolCalls ??= []).push(call);
      else push({ role: "assistant", content: "", toolCalls: [call] }, index);
    } else {
      push({ role: "tool", content: partsText(item.output), toolCallId: item.call_id }, index);
    }
  }
  return { messages, from };
}

/**
 * A break of the rule of function calls (core/chat.ts `checkToolOrder`) as a 400 naming the input item
 * at fault: the function_call_output's `call_id`, or the function_call item of the call named.
 */
function orderProblem(from: number[], input: Item[], problem: { index: number; field: string; message: string }): InvalidRequestError {
  const message = problem.message
    .replaceAll("tool message", "function_call_output")
    .replace("a call of the assistant message before it", "a call of the function_call items right before it")
    .replace("right after it", "right after the calls");
  const start = Math.max(0, from[problem.index] ?? 0);
  if (problem.field === "tool_call_id") {
    const at = `input[${start}].call_id`;
    return new InvalidRequestError("invalid_input", `${at}: ${message}`, at);
  }
  // a call with no output, or an id two calls share: the function_call item with that id
  const quoted = /"(?:[^"\\]|\\.)*"/.exec(problem.message)?.[0];
  const id = quoted ? (JSON.parse(quoted) as string) : undefined;
  const call = input.findIndex((item, i) => i >= start && item.type === "function_call" && item.call_id === id);
  const at = `input[${call >= 0 ? call : start}]`;
  return new InvalidRequestError("invalid_input", `${at}: ${message}`, at);
}

/** A `POST /v1/responses` body checked and turned into the fleet's request (and what its answer repeats). */
export function validateResponses(body: unknown, options: ResponsesValidationOptions = {}): ResponsesBody {
  const model = resolveModel(body, options.models ?? BUILTIN_MODEL_NAMES);
  const b = parseBody(ResponsesRequest, body);
  const { messages, from } = inputMessages(b.instructions, b.input);
  const order = checkToolOrder(messages);
  if (order) throw orderProblem(from, typeof b.input === "string" ? [] : b.input, order);
  const ignored = Object.keys(body as object).filter((k) => !RESPONSES_KNOWN_FIELDS.has(k) || RESPONSES_IGNORED_KNOWN.has(k));
  const tools = (b.tools ?? []).map((t): FunctionToolBody => ({
    type: "function",
    name: t.name,
    description: t.description ?? null,
    parameters: t.parameters ?? null,
    strict: t.strict ?? null,
  }));
  const format = b.text?.format ?? { type: "text" };
  const out: ResponsesBody = {
    model: model ?? b.model,
    requestedModel: b.model,
    messages,
    stream: b.stream ?? false,
    includeUsage: false,
    ignored,
    echo: {
      instructions: b.instructions ?? null,
      maxOutputTokens: b.max_output_tokens ?? null,
      metadata: b.metadata ?? {},
      parallelToolCalls: b.parallel_tool_calls ?? true,
      temperature: b.temperature ?? 1,
      topP: b.top_p ?? 1,
      tools,
      toolChoice: b.tool_choice ?? "auto",
      format,
      ...(b.user !== undefined ? { user: b.user } : {}),
      ...(b.safety_identifier !== undefined ? { safetyIdentifier: b.safety_identifier } : {}),
      ...(b.prompt_cache_key !== undefined ? { promptCacheKey: b.prompt_cache_key } : {}),
    },
  };
  const limit = b.max_output_tokens ?? options.defaultMaxTokens;
  if (limit !== undefined) out.maxTokens = limit;
  if (present(b.temperature)) out.temperature = b.temperature!;
  if (present(b.top_p)) out.sampling = { topP: b.top_p! };
  const choice = b.tool_choice;
  if (tools.length > 0 && choice !== "none") {
    const allowed = typeof choice === "object" && choice?.type === "allowed_tools" ? new Set(choice.tools.map((t) => t.name)) : undefined;
    out.tools = tools
      .filter((t) => !allowed || allowed.has(t.name))
      .map((t): ToolFunction => ({ name: t.name, ...(t.description ? { description: t.description } : {}), ...(t.parameters ? { parameters: t.parameters } : {}) }));
    const toolChoice: ToolChoice | undefined =
      choice === "required" || (typeof choice === "object" && choice?.type === "allowed_tools" && choice.mode === "required")
        ? "required"
        : typeof choice === "object" && choice?.type === "function"
          ? { name: choice.name }
          : undefined;
    if (toolChoice) out.toolChoice = toolChoice;
    if (b.parallel_tool_calls === false) out.parallelToolCalls = false;
  }
  const responseFormat: ResponseFormat | undefined =
    format.type === "json_object" ? { type: "json_object" } : format.type === "json_schema" ? { type: "json_schema", schema: format.schema as Record<string, unknown> } : undefined;
  if (responseFormat) out.responseFormat = responseFormat;
  return out;
}

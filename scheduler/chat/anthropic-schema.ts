/**
 * Anthropic's Messages API requests (`POST /v1/messages`, `POST /v1/messages/count_tokens`) as zod
 * schemas: what validation runs (anthropic.ts) and what the OpenAPI document shows. As Anthropic's own
 * API does, a member Kiln does not know is refused (400 naming it), and so is one it knows and cannot
 * honour (images, documents, thinking, server tools, containers, MCP servers…): nothing a client sends is
 * dropped. The fields and their shapes follow `@anthropic-ai/sdk`'s `MessageCreateParams` and
 * `MessageCountTokensParams` (docs/anthropic-api.md lists what is honoured and what is refused).
 */
import { z } from "zod";
import type { ErrorCode } from "../../core/error-codes.js";
import { issueCode } from "../../core/schema.js";
import { FUNCTION_NAME } from "../../core/json-schema.js";
import { describeValue } from "../../core/validate.js";
import { MAX_TOOLS, MAX_TOP_K, present, ToolParameters } from "./schema.js";

/** Most `stop_sequences`: Kiln matches them in the scheduler (anthropic.ts `StopMatcher`). */
export const MAX_STOP_SEQUENCES = 16;
/** Longest stop sequence, in characters. */
export const MAX_STOP_SEQUENCE_LENGTH = 256;
/** Longest `metadata.user_id`, in characters (Anthropic's limit). */
export const MAX_USER_ID_LENGTH = 256;

type Issue = { path: PropertyKey[]; code: ErrorCode; message: string };
type Rule = (value: unknown, object: Record<string, unknown>) => Omit<Issue, "path"> | undefined;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * `shape` as an object whose members are only those it names: a member it does not name is refused
 * (400 `unsupported_parameter` naming it), and each member with a `rule` is checked by it first (a
 * refusal of what Kiln cannot honour: its own message and code). Refusals come before the shape's own
 * failures, so a client is told first what Kiln does not do.
 */
function closed<T extends z.core.$ZodLooseShape>(where: string, shape: T, rules: Record<string, Rule> = {}, meta?: { id?: string; description?: string }) {
  const object = z.looseObject(shape, { error: `${where} (an object)` });
  return z.preprocess(
    (value, ctx) => {
      if (!isObject(value)) return value;
      checkMembers(value, { where, shape, rules }, (i) => ctx.addIssue({ code: "custom", path: i.path, message: i.message, params: issueCode(i.code), input: value }));
      return value;
    },
    meta ? object.meta(meta) : object,
  );
}

/** A variant of `closedUnion`: where it is (for messages), its members, and the rules of those Kiln refuses. */
interface Variant<T extends z.core.$ZodLooseShape> {
  where: string;
  shape: T;
  rules?: Record<string, Rule>;
}

/**
 * Objects told apart by `key` (a block's `type`, a message's `role`), each `closed` as its variant says:
 * a `key` no variant has is refused with `unknown` (its code and message), a missing one is required.
 * The variants are plain objects under a discriminated union, so a failure inside one is reported as it
 * is (not as "matches no alternative").
 */
function closedUnion(key: string, variants: Record<string, Variant<z.core.$ZodLooseShape>>, unknown: { code: ErrorCode; expected: string }, error: string) {
  const options = Object.values(variants).map((v) => z.looseObject(v.shape));
  const union = z.discriminatedUnion(key, options as unknown as [z.ZodObject], { error });
  return z.preprocess((value, ctx) => {
    if (!isObject(value)) return value;
    const add = (i: Issue) => ctx.addIssue({ code: "custom", path: i.path, message: i.message, params: issueCode(i.code), input: value });
    const tag = value[key];
    if (!present(tag)) add({ path: [key], code: "missing_required_field", message: "is required" });
    else if (typeof tag !== "string" || !Object.hasOwn(variants, tag)) add({ path: [key], code: unknown.code, message: `expected ${unknown.expected}, got ${describeValue(tag)}` });
    else checkMembers(value, variants[tag]!, add);
    return value;
  }, union);
}

/** Refuses the members of `value` its variant does not name, and those its rules refuse. */
function checkMembers(value: Record<string, unknown>, variant: Variant<z.core.$ZodLooseShape>, add: (i: Issue) => void): void {
  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(variant.shape, key))
      add({ path: [key], code: "unsupported_parameter", message: `is not a member of ${variant.where} that Kiln knows; it is refused rather than ignored` });
    const refused = variant.rules && Object.hasOwn(variant.rules, key) ? variant.rules[key]!(value[key], value) : undefined;
    if (refused) add({ path: [key], ...refused });
  }
}

const unsupported = (message: string): Omit<Issue, "path"> => ({ code: "unsupported_parameter", message });
/** A rule refusing any value but null or absent. */
const onlyNull =
  (message: string): Rule =>
  (v) =>
    present(v) ? unsupported(message) : undefined;

const CacheControl = closed("cache_control", {
  type: z.literal("ephemeral", { error: '"ephemeral"' }),
  ttl: z.enum(["5m", "1h"], { error: 'one of "5m", "1h"' }).optional(),
})
  .nullish()
  .meta({
    description:
      "Accepted: Kiln keeps every conversation's KV cache on the slot that served it and reuses its longest matching prefix for the same account by itself, so a breakpoint changes nothing (usage.cache_read_input_tokens says what was reused).",
  });

/** A text block (`TextBlockParam`). */
const TEXT: Variant<z.core.$ZodLooseShape> = {
  where: "a text block",
  shape: {
    type: z.literal("text"),
    text: z.string({ error: "a string" }),
    cache_control: CacheControl,
    citations: z.unknown().optional().meta({ description: "Refused unless null (citations need documents)." }),
  },
  rules: { citations: onlyNull("citations need documents, which Kiln does not take") },
};
const TextBlock = closed(TEXT.where, TEXT.shape, TEXT.rules);

/** Block types and where each may appear; any other type (image, document, thinking, server tools…) is refused by name. */
const BLOCK_PLACES: Record<string, string> = {
  user: 'user messages take "text" and "tool_result" blocks',
  assistant: 'assistant messages take "text" and "tool_use" blocks',
  system: 'system messages take "text" blocks',
  system_prompt: 'system takes "text" blocks',
  tool_result: 'a tool_result\'s content takes "text" blocks',
};
const ALLOWED_BLOCKS: Record<string, readonly string[]> = {
  user: ["text", "tool_result"],
  assistant: ["text", "tool_use"],
  system: ["text"],
  system_prompt: ["text"],
  tool_result: ["text"],
};
/** Block types Kiln cannot take at all, with why (the others are refused as misplaced). */
const UNSUPPORTED_BLOCKS: Record<string, string> = {
  image: "Kiln's models read text only",
  document: "Kiln's models read text only",
  search_result: "search results are not supported",
  thinking: "Kiln's models do not think (extended thinking is not supported)",
  redacted_thinking: "Kiln's models do not think (extended thinking is not supported)",
  container_upload: "containers are not supported",
  tool_reference: "tool search is not supported",
};

/** A list of blocks of the kinds `place` allows, each refused by type otherwise (400 `unsupported_content` naming the block). */
function blocks<S extends z.ZodType>(place: keyof typeof ALLOWED_BLOCKS, item: S) {
  const allowed = ALLOWED_BLOCKS[place]!;
  return z.preprocess(
    (value, ctx) => {
      if (!Array.isArray(value)) return value;
      for (const [i, block] of value.entries()) {
        const type: unknown = isObject(block) ? block.type : undefined;
        if (typeof type !== "string" || allowed.includes(type)) continue;
        const why =
          (Object.hasOwn(UNSUPPORTED_BLOCKS, type) ? UNSUPPORTED_BLOCKS[type] : undefined) ??
          (type.endsWith("_tool_result") || type === "server_tool_use" ? "server tools are not supported" : BLOCK_PLACES[place]!);
        ctx.addIssue({
          code: "custom",
          path: [i],
          message: `blocks of type ${describeValue(type)} are not supported here: ${why}`,
          params: issueCode("unsupported_content"),
          input: block,
        });
      }
      return value;
    },
    z.array(item, { error: "an array of content blocks" }),
  );
}

const TOOL_RESULT: Variant<z.core.$ZodLooseShape> = {
  where: "a tool_result block",
  shape: {
    type: z.literal("tool_result"),
    tool_use_id: z.string({ error: "a string of 1 to 256 characters" }).min(1).max(256),
    content: z
      .union([z.string(), blocks("tool_result", TextBlock)], { error: "a string or an array of text blocks" })
      .optional()
      .meta({ description: "The result as a string or text blocks (joined with a blank line); images and documents are refused." }),
    is_error: z
      .boolean({ error: "a boolean" })
      .optional()
      .meta({ description: 'True: the model is shown the result as "Error: " and its text (chat templates have no place of their own for it).' }),
    cache_control: CacheControl,
  },
};

const TOOL_USE: Variant<z.core.$ZodLooseShape> = {
  where: "a tool_use block",
  shape: {
    type: z.literal("tool_use"),
    id: z.string({ error: "a string of 1 to 256 characters" }).min(1).max(256),
    name: z.string({ error: "a name of 1 to 64 letters, digits, _ or -" }).regex(FUNCTION_NAME),
    input: z.record(z.string(), z.unknown(), { error: "an object" }),
    cache_control: CacheControl,
    caller: z.unknown().optional().meta({ description: 'Accepted when {"type": "direct"}: the model called it.' }),
    toolset_name: z.unknown().optional().meta({ description: "Refused unless null (toolsets are server tools)." }),
  },
  rules: {
    caller: (v) =>
      present(v) && !(isObject(v) && v.type === "direct" && Object.keys(v).length === 1) ? unsupported('only {"type": "direct"}: Kiln runs no server tools') : undefined,
    toolset_name: onlyNull("toolsets are server tools, which Kiln does not run"),
  },
};

const BLOCK_TYPE = { code: "unsupported_content", expected: "a block type" } as const;
const UserBlock = closedUnion("type", { text: TEXT, tool_result: TOOL_RESULT }, BLOCK_TYPE, "a text or tool_result block");
const AssistantBlock = closedUnion("type", { text: TEXT, tool_use: TOOL_USE }, BLOCK_TYPE, "a text or tool_use block");

const content = <S extends z.ZodType>(place: "user" | "assistant" | "system", block: S) =>
  z.union([z.string(), blocks(place, block)], { error: "a string or an array of content blocks" });

const Message = closedUnion(
  "role",
  {
    user: { where: "a user message", shape: { role: z.literal("user"), content: content("user", UserBlock) } },
    assistant: { where: "an assistant message", shape: { role: z.literal("assistant"), content: content("assistant", AssistantBlock) } },
    system: { where: "a system message", shape: { role: z.literal("system"), content: content("system", TextBlock) } },
  },
  { code: "invalid_role", expected: "one of user, assistant, system" },
  "an object with role and content",
).meta({ description: "A turn: role user (text and tool_result blocks), assistant (text and tool_use blocks) or system (text); content a string or blocks." });

/** A tool's `input_schema`: the JSON Schema subset a grammar holds its input to (core/json-schema.ts), an object at the root. */
const InputSchema = ToolParameters.meta({
  description:
    "JSON Schema of the input (type object at the root): the subset chat completions' tools take (docs/openai-api.md); the input is generated under a grammar from it, so it always parses and matches it.",
});

const Tool = closed(
  "a tool",
  {
    name: z.string({ error: "a name of 1 to 64 letters, digits, _ or -" }).regex(FUNCTION_NAME),
    description: z.string({ error: "a string" }).optional(),
    input_schema: InputSchema,
    type: z.unknown().optional().meta({ description: '"custom" or absent; server tools are refused.' }),
    cache_control: CacheControl,
    strict: z.boolean({ error: "a boolean" }).optional().meta({ description: "The input is always held to the schema, strict or not." }),
    eager_input_streaming: z.boolean({ error: "a boolean" }).nullish().meta({ description: "Accepted: the input is always streamed as it is generated." }),
    defer_loading: z.unknown().optional().meta({ description: "Refused when true (tool search is not supported)." }),
    allowed_callers: z.unknown().optional().meta({ description: 'Accepted when ["direct"] only (Kiln runs no code execution).' }),
    input_examples: z.unknown().optional().meta({ description: "Refused when not empty." }),
  },
  {
    type: (v) =>
      present(v) && v !== "custom"
        ? unsupported(`tools of type ${describeValue(v)} are server tools, which Kiln does not run; only custom tools (no type, or "custom")`)
        : undefined,
    defer_loading: (v) => (present(v) && v !== false ? unsupported("tool search is not supported: every tool is shown to the model") : undefined),
    allowed_callers: (v) =>
      present(v) && !(Array.isArray(v) && v.length === 1 && v[0] === "direct") ? unsupported('only ["direct"]: Kiln runs no code execution to call tools') : undefined,
    input_examples: (v) => (present(v) && !(Array.isArray(v) && v.length === 0) ? unsupported("tool input examples are not supported") : undefined),
  },
).meta({ description: "A custom tool: name, description, input_schema. Server tools (bash, web search, code execution, …) are refused." });

const parallel = z.boolean({ error: "a boolean" }).optional().meta({ description: "True: the reply holds one tool_use at most." });
const ToolChoice = closedUnion(
  "type",
  {
    auto: { where: "tool_choice", shape: { type: z.literal("auto"), disable_parallel_tool_use: parallel } },
    any: { where: "tool_choice", shape: { type: z.literal("any"), disable_parallel_tool_use: parallel } },
    tool: { where: "tool_choice", shape: { type: z.literal("tool"), name: z.string({ error: "a tool's name" }).regex(FUNCTION_NAME), disable_parallel_tool_use: parallel } },
    none: { where: "tool_choice", shape: { type: z.literal("none") } },
  },
  { code: "invalid_tool_choice", expected: 'one of "auto", "any", "tool", "none"' },
  'an object with type "auto", "any", "tool" or "none"',
).meta({
  description:
    "auto (default): the model decides; any: it calls a tool; tool: it calls the one named; none: it answers in text and is not shown the tools. disable_parallel_tool_use: one call at most.",
});

const refused = (description: string) =>
  z
    .unknown()
    .optional()
    .meta({ description: `Not supported: refused with 400 unsupported_parameter when set. ${description}` });

/** Top-level members Kiln knows and cannot honour, each refused with why (beyond their `refused` description). */
const TOP_RULES: Record<string, Rule> = {
  thinking: (v) =>
    present(v) && !(isObject(v) && v.type === "disabled" && Object.keys(v).length === 1)
      ? unsupported('Kiln\'s models do not think (extended thinking is not supported); send none or {"type": "disabled"}')
      : undefined,
  service_tier: (v) =>
    present(v) && v !== "auto" && v !== "standard_only" ? unsupported(`${describeValue(v)} is not offered: "auto" or "standard_only" (the account's tier applies)`) : undefined,
  speed: (v) => (present(v) && v !== "standard" ? unsupported(`${describeValue(v)} is not offered: only "standard"`) : undefined),
  container: onlyNull("containers (code execution, skills) are not supported"),
  mcp_servers: (v) => (present(v) && !(Array.isArray(v) && v.length === 0) ? unsupported("Kiln does not connect a model to MCP servers") : undefined),
  context_management: onlyNull("context management (server-side clearing of old turns) is not supported"),
  output_config: onlyNull("output_config (effort, output format) is not supported"),
  inference_geo: onlyNull("Kiln does not place requests by region"),
  diagnostics: onlyNull("prompt-cache diagnostics are not supported"),
};

const CONVERSATION = {
  model: z.string({ error: "a string" }).meta({
    description: "A model of GET /v1/models: its id, or one of its aliases in the operator's catalog (a name no model has is a 400). The answer's model is the name sent.",
  }),
  messages: z.array(Message, { error: "an array of messages" }).min(1, { error: "at least one message" }).meta({
    description:
      "The conversation. Each assistant tool_use is answered by a tool_result in the next user message, before its text; consecutive turns of one role are combined into one, as Anthropic combines them.",
  }),
  system: z
    .union([z.string(), blocks("system_prompt", TextBlock)], { error: "a string or an array of text blocks" })
    .optional()
    .meta({ description: "The system prompt: a string or text blocks (joined with a blank line)." }),
  tools: z
    .array(Tool, { error: "an array of tools" })
    .max(MAX_TOOLS, { error: `at most ${MAX_TOOLS} tools` })
    .optional()
    .meta({
      description:
        "Custom tools the model may call, documented in the prompt in its chat template's syntax; a call's name and input are generated under grammars (a known name, an input valid for its input_schema).",
    }),
  tool_choice: ToolChoice.optional(),
  thinking: z.unknown().optional().meta({ description: 'Refused unless {"type": "disabled"}: Kiln\'s models do not think.' }),
  cache_control: CacheControl,
  container: refused("Containers."),
  mcp_servers: refused("MCP connectors (an empty list is accepted)."),
  context_management: refused("Context management."),
  output_config: refused("Effort and output formats."),
  speed: z.unknown().optional().meta({ description: 'Only "standard" is accepted.' }),
  inference_geo: refused("Inference regions."),
  diagnostics: refused("Prompt-cache diagnostics."),
};

/** The `POST /v1/messages` request. */
export const MessagesRequest = closed(
  "the request",
  {
    ...CONVERSATION,
    max_tokens: z
      .int({ error: "an integer of at least 1" })
      .min(1)
      .meta({ description: "Most tokens to generate (required); never more than the context has left. 0 (pre-warming a cache) is refused." }),
    stop_sequences: z
      .array(
        z
          .string({ error: `a string of 1 to ${MAX_STOP_SEQUENCE_LENGTH} characters` })
          .min(1)
          .max(MAX_STOP_SEQUENCE_LENGTH),
        { error: "an array of strings" },
      )
      .max(MAX_STOP_SEQUENCES, { error: `at most ${MAX_STOP_SEQUENCES} sequences` })
      .optional()
      .meta({
        description: `Up to ${MAX_STOP_SEQUENCES} texts that end the reply where one first appears (stop_reason "stop_sequence", stop_sequence naming it); never part of it.`,
      }),
    stream: z.boolean({ error: "a boolean" }).optional().meta({ description: "Server-sent events in Anthropic's sequence (message_start … message_stop)." }),
    temperature: z
      .number({ error: "a number from 0 to 1" })
      .min(0)
      .max(1)
      .optional()
      .meta({ description: "Sampling temperature, 0 to 1 (Anthropic's range); 0 is greedy. Default 1." }),
    top_p: z.number({ error: "a number from 0 to 1" }).min(0).max(1).optional().meta({ description: "Nucleus sampling." }),
    top_k: z
      .int({ error: `an integer from 0 to ${MAX_TOP_K}` })
      .min(0)
      .max(MAX_TOP_K)
      .optional()
      .meta({ description: "Sample from the k most likely tokens only (0: all)." }),
    metadata: closed("metadata", {
      user_id: z
        .string({ error: `a string of at most ${MAX_USER_ID_LENGTH} characters` })
        .max(MAX_USER_ID_LENGTH)
        .nullish()
        .meta({ description: "Accepted and unused (listed in x-kiln-ignored-fields)." }),
    }).optional(),
    service_tier: z.unknown().optional().meta({ description: '"auto" or "standard_only": the account\'s tier applies.' }),
  },
  TOP_RULES,
  { id: "AnthropicMessagesRequest", description: "Anthropic's Messages API request. Members Kiln does not know, or cannot honour, are refused with a 400 naming them." },
);

/** The `POST /v1/messages/count_tokens` request: the conversation without generation's fields. */
export const CountTokensRequest = closed("the request", CONVERSATION, TOP_RULES, {
  id: "AnthropicCountTokensRequest",
  description: "The tokens a Messages request of this conversation, system prompt and tools would be given (its prompt, as the model's chat template renders it).",
});

/** Members of a request that change nothing here, listed in `x-kiln-ignored-fields` when sent. */
export const IGNORED_ANTHROPIC: ReadonlySet<string> = new Set(["metadata"]);

export type MessagesRequestBody = z.output<typeof MessagesRequest>;
export type CountTokensRequestBody = z.output<typeof CountTokensRequest>;

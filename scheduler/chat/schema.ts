/**
 * The `POST /v1/chat/completions` request as one zod schema: what validation runs (validate.ts) and
 * what the OpenAPI document shows. OpenAI's superset around the spec's rules: a field is honoured,
 * or refused naming it (`unsupported_parameter`); unknown members pass (a newer client's fields).
 * Each schema's `error` is the phrase of what it expects (core/schema.ts).
 */
import { z } from "zod";
import type { ErrorCode } from "../../core/error-codes.js";
import { issueCode, refusal } from "../../core/schema.js";
import { MAX_CHOICES, MAX_TOP_LOGPROBS } from "../../core/chat.js";
import { checkJsonSchema, checkToolParameters, FUNCTION_NAME, MAX_SCHEMA_COUNT } from "../../core/json-schema.js";
import { describeValue, MAX_JSON_DEPTH, nestedDeeperThan } from "../../core/validate.js";
import { isCatalogModel } from "../../models/catalog.js";
import { InvalidRequestError } from "../../core/errors.js";

/** Most stop texts, as OpenAI allows. */
export const MAX_STOPS = 4;
/** Longest stop text, in characters. */
export const MAX_STOP_LENGTH = 256;
/** Most `logit_bias` entries. */
export const MAX_LOGIT_BIAS = 1024;
/** Largest `top_k` (llama.cpp reads it as a 32-bit signed integer). */
export const MAX_TOP_K = 2 ** 31 - 1;
/** Largest `seed` (llama.cpp's seeds are 32-bit unsigned; a larger one would wrap, a negative one become 0). */
export const MAX_SEED = 2 ** 32 - 1;

/** The roles a message may have; `developer` (OpenAI's newer system role) is read as `system`. */
export const MESSAGE_ROLES = ["system", "user", "assistant", "developer", "tool"] as const;
/** Most tools one request may offer (OpenAI's limit). */
export const MAX_TOOLS = 128;
const functionName = () => z.string({ error: "a name of 1 to 64 letters, digits, _ or -" }).regex(FUNCTION_NAME);

/** A refusal `refuseFirst` reports: the field's path, its code, and the message. */
export type Refusal = { path: (string | number)[]; code: ErrorCode; message: string };
type Check = (value: Record<string, unknown>) => Refusal | undefined;

/**
 * `schema`, with `check` run first on the raw object: a refusal it finds is the error reported, before
 * the schema's own (a `tool` message is refused as unsupported, not as an unknown role).
 */
export function refuseFirst<S extends z.ZodType>(check: Check, schema: S) {
  return z.preprocess((value, ctx) => {
    if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      const refused = check(value as Record<string, unknown>);
      if (refused) ctx.addIssue({ code: "custom", path: refused.path, message: refused.message, params: issueCode(refused.code), input: value });
    }
    return value;
  }, schema);
}

/** Whether a field was given a value (neither absent nor null). */
export const present = (v: unknown): boolean => v !== undefined && v !== null;

const TextPart = refuseFirst(
  (part) =>
    part.type === "text" ? undefined : { path: [], code: "unsupported_content", message: `content parts of type ${describeValue(part.type)} are not supported; only "text"` },
  z.looseObject({ type: z.literal("text"), text: z.string({ error: "a string" }) }, { error: "a content part object" }),
).meta({ description: "A text part; the parts of a message are joined. Other part types (image_url, input_audio, file) are refused with 400 unsupported_content." });

/** JSON text carried in a string (a call's arguments): it must parse, and nest no deeper than a body may; refused as `code`. */
export const jsonTextOf = (code: ErrorCode) =>
  z.string({ error: "a string of JSON" }).superRefine((text, ctx) => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      ctx.addIssue({ code: "custom", message: "is not JSON", params: issueCode(code), input: text });
      return;
    }
    if (nestedDeeperThan(value, MAX_JSON_DEPTH)) ctx.addIssue({ code: "custom", message: `nests deeper than ${MAX_JSON_DEPTH} levels`, params: issueCode(code), input: text });
  });

const jsonText = jsonTextOf("invalid_messages");

const ToolCall = z.looseObject(
  {
    id: z.string({ error: "a string of 1 to 256 characters" }).min(1).max(256),
    type: z.literal("function", { error: '"function"' }),
    function: z.looseObject({ name: functionName(), arguments: jsonText }, { error: "an object with name and arguments" }),
  },
  { error: "a tool call object" },
);

const Message = refuseFirst(
  (m) =>
    m.role === "function"
      ? { path: ["role"], code: "unsupported_parameter", message: '"function" messages (deprecated function calling) are not supported; use tools and "tool" messages' }
      : undefined,
  z
    .looseObject(
      {
        role: z.enum(MESSAGE_ROLES, { error: `one of ${MESSAGE_ROLES.join(", ")}` }),
        content: z.union([z.string(), z.array(TextPart)], { error: "a string or an array of content parts" }).nullish(),
        name: z
          .string({ error: "a name of 1 to 64 letters, digits, _ or -" })
          .regex(FUNCTION_NAME)
          .nullish()
          .meta({ description: "The participant's name: the message's text is given to the model as \"name: text\" (chat templates have no place of their own for it)." }),
        tool_calls: z
          .array(ToolCall, { error: "an array of tool calls" })
          .nullish()
          .meta({ description: "An assistant message's function calls (content may then be null), each answered by a tool message right after it." }),
        tool_call_id: z.string({ error: "a string" }).nullish().meta({ description: "A tool message: the id of the call whose result it holds." }),
      },
      { error: "an object with role and content" },
    )
    .superRefine((m, ctx) => {
      const issue = (path: string, code: ErrorCode, message: string) =>
        ctx.addIssue({ code: "custom", path: [path], message, params: issueCode(code), input: m[path as keyof typeof m] });
      if (m.tool_calls?.length && m.role !== "assistant") issue("tool_calls", "invalid_messages", "only assistant messages have tool calls");
      if (m.role === "tool" && !present(m.tool_call_id)) issue("tool_call_id", "missing_required_field", "is required in a tool message");
      if (!present(m.content) && !(m.role === "assistant" && m.tool_calls?.length))
        issue("content", "missing_required_field", "is required (it may be null only in an assistant message with tool_calls)");
    }),
);

/** A tool's parameters (every API's): the JSON Schema subset a grammar holds its arguments to, an object at the root; refused as invalid_tools. */
export const ToolParameters = z.record(z.string(), z.unknown(), { error: "a JSON Schema object" }).superRefine((schema, ctx) => {
  const problem = checkToolParameters(schema);
  if (problem) ctx.addIssue({ code: "custom", path: problem.path ? [problem.path] : [], message: problem.message, params: issueCode("invalid_tools"), input: schema });
});

const FunctionParameters = ToolParameters.meta({
  description:
    "JSON Schema of the arguments (type object at the root), the subset response_format's json_schema takes; the arguments are generated under a grammar from it, so they always parse and match it.",
});

const Tool = refuseFirst(
  (t) =>
    t.type === "function" ? undefined : { path: ["type"], code: "unsupported_parameter", message: `tools of type ${describeValue(t.type)} are not supported; only "function"` },
  z.looseObject(
    {
      type: z.literal("function"),
      function: z.looseObject(
        {
          name: functionName(),
          description: z.string({ error: "a string" }).nullish(),
          parameters: FunctionParameters.nullish(),
          strict: z.boolean({ error: "a boolean" }).nullish().meta({ description: "The arguments are always held to the schema, strict or not." }),
        },
        { error: "an object with a name" },
      ),
    },
    { error: "a tool object" },
  ),
);

const TOOL_CHOICES = 'one of "none", "auto", "required", or {"type": "function", "function": {"name": …}}';
const ToolChoice = z.union(
  [z.enum(["none", "auto", "required"], { error: TOOL_CHOICES }), z.looseObject({ type: z.literal("function"), function: z.looseObject({ name: functionName() }) })],
  { error: TOOL_CHOICES },
);

/** `response_format.json_schema.schema`: the JSON Schema subset a grammar can hold the output to (core/json-schema.ts). */
const OutputSchema = z
  .record(z.string(), z.unknown(), { error: "a JSON Schema object" })
  .superRefine((schema, ctx) => {
    const problem = checkJsonSchema(schema);
    if (problem) ctx.addIssue({ code: "custom", path: problem.path ? [problem.path] : [], message: problem.message, params: issueCode("invalid_response_format"), input: schema });
  })
  .meta({
    description: `JSON Schema: type, properties (all required, as OpenAI's strict mode), additionalProperties, items, prefixItems, enum, const, oneOf/anyOf, $defs/$ref, format date/time/date-time, and min/max counts up to ${MAX_SCHEMA_COUNT}. Other keywords (pattern, minimum, allOf, …) are refused with 400 invalid_response_format.`,
  });

const ResponseFormat = z
  .looseObject(
    {
      type: z.enum(["text", "json_object", "json_schema"], { error: "one of text, json_object, json_schema" }),
      json_schema: z
        .looseObject(
          {
            name: functionName(),
            description: z.string({ error: "a string" }).nullish(),
            schema: OutputSchema.nullish(),
            strict: z.boolean({ error: "a boolean" }).nullish().meta({ description: "The output is always held to the schema, strict or not." }),
          },
          { error: "an object with name and schema" },
        )
        .nullish(),
    },
    { error: "an object with a type" },
  )
  .superRefine((format, ctx) => {
    if (format.type === "json_schema" && !format.json_schema)
      ctx.addIssue({ code: "custom", path: ["json_schema"], message: "is required with type json_schema", params: issueCode("missing_required_field"), input: format });
  });

const nullable = <S extends z.ZodType>(schema: S, description: string) => schema.nullish().meta({ description });
const numberIn = (min: number, max: number, description: string) =>
  nullable(
    z
      .number({ error: `a number from ${min} to ${max}` })
      .min(min)
      .max(max),
    description,
  );
const integerFrom = (min: number, max: number | undefined, description: string) => {
  const range = max === undefined ? `of at least ${min}` : `from ${min} to ${max}`;
  const base = z.int({ error: `an integer ${range}` }).min(min);
  return nullable(max === undefined ? base : base.max(max), description);
};
const stopText = z
  .string({ error: `a string of 1 to ${MAX_STOP_LENGTH} characters` })
  .min(1)
  .max(MAX_STOP_LENGTH);
/** A field this service refuses when it is set (described so in the document). */
const refused = (description: string) =>
  z
    .unknown()
    .optional()
    .meta({ description: `Not supported: refused with 400 unsupported_parameter when set. ${description}` });

/**
 * The names a request's `model` may give, and the id each is served as: the scheduler's catalog
 * (scheduler/catalog: the operator's ids and aliases, or the built-in ids while it has none).
 */
export interface ModelNames {
  /** The canonical id `model` names, or undefined when it names no model of this service. */
  canonical(model: string): string | undefined;
}

/** The built-in ids (models/catalog.ts), each as itself: what a scheduler without an operator's catalog accepts. */
export const BUILTIN_MODEL_NAMES: ModelNames = { canonical: (model) => (isCatalogModel(model) ? model : undefined) };

/**
 * A request's `model`, checked before its schema (whose other fields it comes before, as the schema
 * would report it): the canonical id a string names, or a 400 `model_not_found` naming `model`.
 * Undefined when the body has no string `model`: the schema reports that.
 */
export function resolveModel(body: unknown, names: ModelNames): string | undefined {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  const model = (body as { model?: unknown }).model;
  if (typeof model !== "string") return undefined;
  const id = names.canonical(model);
  if (id === undefined) throw new InvalidRequestError("model_not_found", `model: ${describeValue(model)} is not a model of this service (see GET /v1/models)`, "model");
  return id;
}

/** The fields of every generation request (chat and legacy completions): the model, limits, sampling, streaming. */
export const GENERATION_FIELDS = {
  // which names are models is the catalog's to say, at run time: resolveModel checks it before the schema runs
  model: z.string({ error: "a string" }).meta({
    description:
      "A model of GET /v1/models: its id, or one of its aliases in the operator's catalog (a name no model has is a 400 model_not_found). The answer's model is the name sent.",
  }),
  max_tokens: integerFrom(1, undefined, "Most tokens to generate; never more than the context has left."),
  temperature: numberIn(0, 2, "Sampling temperature; 0 is greedy. Default 1."),
  top_p: numberIn(0, 1, "Nucleus sampling: the smallest set of tokens whose probabilities add up to top_p."),
  top_k: integerFrom(0, MAX_TOP_K, "llama.cpp extension: sample from the k most likely tokens only (0: all)."),
  min_p: numberIn(0, 1, "llama.cpp extension: drop tokens below min_p times the most likely token's probability."),
  seed: integerFrom(0, MAX_SEED, "The same seed, request and model give the same reply."),
  presence_penalty: numberIn(-2, 2, "Subtracted from the logit of each token already generated (over the last 64)."),
  frequency_penalty: numberIn(-2, 2, "Subtracted from a token's logit once per time it was generated (over the last 64)."),
  repeat_penalty: nullable(
    z.number({ error: "a number above 0 and at most 10" }).gt(0).max(10),
    "llama.cpp extension: the logits of tokens already generated are divided by it (1: off).",
  ),
  logit_bias: nullable(
    z
      .record(z.string({ error: "a token id" }).regex(/^(0|[1-9]\d{0,9})$/), z.number({ error: "a number from -100 to 100" }).min(-100).max(100), {
        error: "an object of token ids to numbers",
      })
      .refine(
        (bias) => Object.keys(bias).length <= MAX_LOGIT_BIAS,
        refusal("invalid_logit_bias", (i) => `at most ${MAX_LOGIT_BIAS} tokens, got ${Object.keys(i.input as object).length}`),
      ),
    "Token id → bias added to its logit (-100 to 100; -100 bans the token). A token id the model does not have is a 400.",
  ),
  stop: nullable(
    z.union([stopText, z.array(stopText).max(MAX_STOPS, { error: `at most ${MAX_STOPS} sequences` })], { error: "a string or an array of strings" }),
    `Up to ${MAX_STOPS} texts that end the reply where they first appear (finish_reason "stop"); never part of it.`,
  ),
  stream: nullable(z.boolean({ error: "a boolean" }), "Server-sent events of chunks, ending with data: [DONE]."),
  stream_options: nullable(
    z.looseObject({ include_usage: z.boolean({ error: "a boolean" }).nullish() }, { error: "an object" }),
    "include_usage: a last chunk with no choices and the usage.",
  ),
  user: z.unknown().optional().meta({ description: "Accepted and ignored (listed in x-kiln-ignored-fields)." }),
};

const Fields = {
  ...GENERATION_FIELDS,
  messages: z
    .array(Message, { error: "an array of messages" })
    .min(1, { error: "at least one message" })
    .meta({ description: "The conversation. Roles system, user, assistant, developer (read as system) and tool (a function's result); content a string or text parts." }),
  max_tokens: integerFrom(1, undefined, "Most tokens to generate; default the scheduler's --default-max-tokens, and never more than the context has left."),
  max_completion_tokens: integerFrom(1, undefined, "OpenAI's newer name of max_tokens; when both are sent they must agree."),
  n: integerFrom(
    1,
    MAX_CHOICES,
    "Choices to generate, each on a slot of its own after one evaluation of the prompt (shared through the KV cache), each with its own seed (the request's seed plus its index, when given). At most the slots of an agent serving the model.",
  ),
  logprobs: nullable(
    z.boolean({ error: "a boolean" }),
    "The log probability of each generated token (choices[].logprobs.content), streamed too: of the distribution the token was sampled from, after the sampler's filters (top_k, top_p, min_p); at temperature 0, the model's whole distribution.",
  ),
  top_logprobs: integerFrom(0, MAX_TOP_LOGPROBS, "With logprobs: this many of the most likely tokens at each place."),
  response_format: nullable(
    ResponseFormat,
    'Output held to JSON by a grammar: {"type": "json_object"}, or {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}; "text" is the default.',
  ),
  tools: nullable(
    z.array(Tool, { error: "an array of tools" }).max(MAX_TOOLS, { error: `at most ${MAX_TOOLS} tools` }),
    "Functions the model may call, documented in the prompt in its chat template's syntax. A call's name and arguments are generated under grammars: a known name, arguments valid for its parameters. Not with n > 1, logprobs or response_format.",
  ),
  tool_choice: nullable(
    ToolChoice,
    '"auto" (default with tools): the model decides; "none": it answers in text and is not shown the tools; "required": it calls one at least; a named function: it calls that one (shown only it).',
  ),
  parallel_tool_calls: nullable(z.boolean({ error: "a boolean" }), "Whether one reply may hold several calls (default true)."),
  functions: refused("Deprecated function calling (an empty list is accepted)."),
  function_call: refused('"none" and "auto" are accepted.'),
  store: nullable(z.boolean({ error: "a boolean" }), "Completions are not stored: true is refused."),
  service_tier: nullable(z.string({ error: "a string" }), 'The account\'s tier applies: only "auto" and "default" are accepted.'),
  modalities: nullable(z.array(z.string({ error: "a string" }), { error: "an array" }), 'Only ["text"] is supported.'),
  audio: refused("Audio output."),
  prediction: refused("Predicted outputs."),
  web_search_options: refused("Web search."),
  reasoning_effort: refused("Reasoning effort."),
  metadata: z.unknown().optional().meta({ description: "Accepted and ignored (listed in x-kiln-ignored-fields)." }),
};

/** Members documented but with no effect here: reported back as ignored, like unknown ones. */
export const IGNORED_KNOWN: ReadonlySet<string> = new Set(["user", "metadata"]);

/** The OpenAI features this service does not implement, refused when a request asks for them. */
function refuseUnsupported(b: z.infer<typeof Shape>, ctx: z.RefinementCtx): void {
  const refuse = (field: string, message: string): void => {
    ctx.addIssue({ code: "custom", path: [field], message, params: issueCode("unsupported_parameter"), input: b[field as keyof typeof b] });
  };
  const setList = (v: unknown): boolean => (Array.isArray(v) ? v.length > 0 : present(v));
  const choice = (v: unknown): boolean => present(v) && v !== "none" && v !== "auto";
  if (present(b.top_logprobs) && b.logprobs !== true) {
    ctx.addIssue({ code: "custom", path: ["top_logprobs"], message: "needs logprobs: true", params: issueCode("invalid_top_logprobs"), input: b.top_logprobs });
  }
  checkTools(b, ctx, refuse);
  if (setList(b.functions)) refuse("functions", "function calling is not supported yet");
  if (choice(b.function_call)) refuse("function_call", "function calling is not supported yet");
  if (b.store === true) refuse("store", "completions are not stored by this service");
  if (present(b.service_tier) && b.service_tier !== "auto" && b.service_tier !== "default")
    refuse("service_tier", `${describeValue(b.service_tier)} is not offered; the account's tier applies`);
  if (b.modalities?.some((m) => m !== "text")) refuse("modalities", "only text output is supported");
  for (const field of ["audio", "prediction", "web_search_options", "reasoning_effort"] as const) if (present(b[field])) refuse(field, "not supported by this service");
  if (present(b.max_tokens) && present(b.max_completion_tokens) && b.max_tokens !== b.max_completion_tokens) {
    ctx.addIssue({
      code: "custom",
      path: ["max_completion_tokens"],
      message: `${b.max_completion_tokens} differs from max_tokens ${b.max_tokens}; send one`,
      params: issueCode("invalid_max_tokens"),
      input: b.max_completion_tokens,
    });
  }
}

/**
 * Tools against the rest of the request: unique names, a choice that names one of them (or needs
 * them), and the features a turn with tools does not have (n > 1, logprobs, response_format).
 */
function checkTools(b: z.infer<typeof Shape>, ctx: z.RefinementCtx, refuse: (field: string, message: string) => void): void {
  const tools = b.tools ?? [];
  const names = new Set<string>();
  for (const [i, tool] of tools.entries()) {
    if (names.has(tool.function.name))
      ctx.addIssue({
        code: "custom",
        path: ["tools", i, "function", "name"],
        message: `${JSON.stringify(tool.function.name)} is the name of an earlier tool`,
        params: issueCode("invalid_tools"),
        input: tool.function.name,
      });
    names.add(tool.function.name);
  }
  const choice = b.tool_choice;
  if (typeof choice === "object" && choice !== null && !names.has(choice.function.name)) {
    ctx.addIssue({
      code: "custom",
      path: ["tool_choice", "function", "name"],
      message: `${JSON.stringify(choice.function.name)} is not one of the tools`,
      params: issueCode("invalid_tool_choice"),
      input: choice.function.name,
    });
  } else if (choice === "required" && tools.length === 0) {
    ctx.addIssue({ code: "custom", path: ["tool_choice"], message: '"required" needs tools', params: issueCode("invalid_tool_choice"), input: choice });
  }
  if (tools.length === 0 || choice === "none") return;
  if (b.n && b.n > 1) refuse("n", "with tools, one choice only");
  if (b.logprobs === true) refuse("logprobs", "not supported together with tools");
  if (b.response_format && b.response_format.type !== "text") refuse("response_format", "not supported together with tools (a call's arguments are held to its parameters)");
}

const Shape = z.looseObject(Fields);

/** The chat completion request (unknown members pass through). */
export const ChatCompletionRequest = Shape.superRefine(refuseUnsupported).meta({
  id: "ChatCompletionRequest",
  description: "OpenAI's chat completion request; unknown members are accepted and listed in the x-kiln-ignored-fields response header.",
});

/** The members the schema knows. */
export const KNOWN_FIELDS: ReadonlySet<string> = new Set(Object.keys(Fields));

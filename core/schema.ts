/**
 * Request bodies checked against zod schemas. The schemas are the one description of each request:
 * validation runs them and the OpenAPI document is generated from them. Every failure becomes an
 * `InvalidRequestError` whose message starts with the field's path (`messages[0].role: …`), which is
 * also its `param`, and whose code says what kind of failure it was:
 *
 * - `missing_required_field`: absent or null where a value is required;
 * - `invalid_type`: a value of the wrong JSON type;
 * - `invalid_<field>`: the right type out of range, or not one of the allowed values (`<field>` is the
 *   last named member on the path: `invalid_temperature`, `invalid_role`);
 * - a refinement's own code, given as `params: { code }` (`model_not_found`, `unsupported_parameter`).
 *
 * A schema's `error` is the phrase for what it expects ("a number from 0 to 2"); messages read
 * "`path`: expected `phrase`, got `what came`". Refinements' messages are used as they are.
 */
import { z } from "zod";
import { InvalidRequestError } from "./errors.js";
import { describeValue, jsonObject, typeName } from "./validate.js";
import { fieldCode, type ErrorCode } from "./error-codes.js";

/** What a schema without its own `error` expects, by zod's name for the type. */
const EXPECTED: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  array: "an array",
  object: "an object",
  record: "an object",
  literal: "a fixed value",
  enum: "one of the allowed values",
};

/** The default phrase of an issue whose schema gave none. */
function defaultPhrase(issue: z.core.$ZodRawIssue): string {
  if (issue.code === "invalid_type") return EXPECTED[issue.expected] ?? issue.expected;
  if (issue.code === "invalid_value") return `one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
  if (issue.code === "too_small" || issue.code === "too_big") {
    const bound = issue.code === "too_small" ? `at least ${String(issue.minimum)}` : `at most ${String(issue.maximum)}`;
    return issue.origin === "array" ? `${bound} items` : issue.origin === "string" ? `${bound} characters` : `a value of ${bound}`;
  }
  return "a valid value";
}

/** `["messages", 0, "role"]` → `messages[0].role`; the root is `body`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) out += typeof key === "number" ? `[${key}]` : out ? `.${String(key)}` : String(key);
  return out || "body";
}

/**
 * The last member name on a path that reads as a field (not an index, not a map's key such as a token
 * id, not `type`: `invalid_type` is the wrong-type code, so `response_format.type` is `invalid_response_format`).
 */
function lastField(path: readonly PropertyKey[]): string {
  for (let i = path.length - 1; i >= 0; i--) {
    const key = path[i];
    if (typeof key === "string" && key !== "type" && /^[A-Za-z_]\w*$/.test(key)) return key;
  }
  return "body";
}

/** What came, for a message: a value as describeValue shows it; a list by its length. */
function what(input: unknown): string {
  return Array.isArray(input) ? `${input.length} item${input.length === 1 ? "" : "s"}` : describeValue(input);
}

/** The InvalidRequestError for a zod issue (module doc: the codes and the message shape). */
export function issueError(issue: z.core.$ZodIssue): InvalidRequestError {
  const at = fieldPath(issue.path);
  const params = (issue as { params?: { code?: ErrorCode; param?: string } }).params;
  if (issue.code === "custom" && params?.code) return new InvalidRequestError(params.code, `${at}: ${issue.message}`, params.param ?? at);
  const input = (issue as { input?: unknown }).input;
  // absent or null where a member is required (null in a list is a value of the wrong type)
  const member = typeof issue.path.at(-1) === "string";
  if ((issue.code === "invalid_type" || issue.code === "invalid_value" || issue.code === "invalid_union") && member && (input === undefined || input === null)) {
    return new InvalidRequestError("missing_required_field", `${at}: is required`, at);
  }
  // a number that is not an integer is out of range, not of the wrong type
  const fraction = issue.code === "invalid_type" && issue.expected === "int" && typeof input === "number";
  const wrongKind = issue.code === "invalid_value" && issue.values.length > 0 && issue.values.every((v) => typeof v !== typeof input);
  if ((issue.code === "invalid_type" && !fraction) || wrongKind) {
    return new InvalidRequestError("invalid_type", `${at}: expected ${issue.message}, got ${typeName(input)}`, at);
  }
  if (issue.code === "invalid_key") {
    // a map's key that is not one (logit_bias's "-1"): the map is the field at fault
    const map = issue.path.slice(0, -1);
    const field = fieldPath(map);
    return new InvalidRequestError(
      fieldCode(lastField(map)),
      `${field}: expected keys that are ${issue.issues[0]?.message ?? "valid"}, got ${describeValue(issue.path.at(-1))}`,
      field,
    );
  }
  if (issue.code === "invalid_union") {
    // The alternative the value's type matched failed deeper in (or refused it): that failure is the one to report.
    const inner = issue.errors.map((branch) => branch[0]).find((i) => i && !(i.code === "invalid_type" && i.path.length === 0));
    if (inner) return issueError({ ...inner, path: [...issue.path, ...inner.path] });
    return new InvalidRequestError("invalid_type", `${at}: expected ${issue.message}, got ${typeName(input)}`, at);
  }
  return new InvalidRequestError(fieldCode(lastField(issue.path)), `${at}: expected ${issue.message}, got ${what(input)}`, at);
}

/**
 * Each body schema compiled once (`z.compile`): the generated parser answers a valid body, and a
 * body it refuses is parsed again by the schema itself, whose issues are the ones reported. A
 * chat completion's body: 20 µs down to 4 µs while the code is warm (100 parses), 6 down to 3 µs hot.
 */
const compiled = new WeakMap<z.ZodType, z.ZodType>();

/**
 * `body` checked against `schema`: the parsed value, or the first failure as an InvalidRequestError.
 * Only a JSON object is a body (a 400 naming `body` otherwise).
 *
 * The schema is run as zod's own Standard Schema `validate` runs it, and only the first issue is
 * finalized: `safeParse`'s `error` builds a `ZodError` of every issue, about a fifth of a refused
 * request's time on the gateway (docs/performance.md "The gateway against a bare server"). Issues
 * keep their input (messages say what came) and take `defaultPhrase`; a list or object stops at its
 * first member whose failure ends the parse of that member, so a body of many bad members costs
 * one. The context is made for each parse: a compiled schema marks it when it falls back.
 */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  let run = compiled.get(schema);
  if (!run) compiled.set(schema, (run = z.compile(schema)));
  const context: z.core.ParseContextInternal<z.core.$ZodIssue> = { async: false, abortEarly: true, reportInput: true, error: defaultPhrase };
  const result = run._zod.run({ value: jsonObject(body), issues: [] }, context);
  // a body's schemas have no async refinements; one added by mistake fails loudly here, not silently
  if (result instanceof Promise) throw new Error("a request schema has an asynchronous check; body schemas must be synchronous");
  const first = result.issues[0];
  if (first === undefined) return result.value as z.output<S>;
  throw issueError(z.core.util.finalizeIssue(first, context, z.core.config()));
}

/**
 * A refinement's failure with its own code (and the param it names, when not the issue's path), for
 * `.refine(…, refusal("model_not_found", …))` and `ctx.addIssue`.
 */
export function refusal(code: ErrorCode, error: string | ((issue: { input: unknown }) => string)) {
  return { params: { code }, error: typeof error === "string" ? error : (issue: { input: unknown }) => error(issue) };
}

/** `ctx.addIssue`'s `params` for an issue with its own code: `params: issueCode("invalid_tools")` (zod types params loosely; this checks the code). */
export function issueCode(code: ErrorCode): { code: ErrorCode } {
  return { code };
}

/**
 * The JSON Schema subset structured output is held to: what node-llama-cpp turns into a llama.cpp
 * grammar (its `GbnfJsonSchema`) and enforces as written, plus `anyOf` (the same alternation as
 * `oneOf` for a grammar), a list of types (rewritten as alternatives), and annotations that change
 * nothing (`title`, `default`, `examples`, `$schema`, `$id`, `$comment`). Anything else would be
 * ignored by the grammar, so the output could break the schema the client relies on: it is refused
 * instead, naming its path. That covers keywords outside the subset (`pattern`, `minimum`, `allOf`, …),
 * keywords beside `oneOf`/`anyOf`/`$ref` (the grammar reads only those), empty schemas (node-llama-cpp
 * reads "anything" as null), `required` names that are not properties, length limits on a `format`,
 * and values a grammar cannot write (control characters, numbers that are not finite).
 *
 * Tenants are hostile, and a grammar's cost is paid by every request on the agent's context:
 * - bounded size: MAX_SCHEMA_BYTES of JSON, MAX_SCHEMA_NODES nodes, MAX_ENUM_VALUES enum values;
 * - bounded repetition: counts up to MAX_SCHEMA_COUNT (llama.cpp expands `x{m,n}` into rules);
 * - bounded ambiguity: llama.cpp keeps one parse state per alternative still possible, and nested
 *   alternatives multiply (measured: 10 alternatives 4 deep took 1–2 s per token). A schema may keep
 *   at most MAX_PARSE_STATES alternatives open at once (alternatives add up, nesting takes the
 *   largest), which also rules out recursion through `$ref`: `$ref` points only into the root's
 *   `$defs`, and never back into a definition it is inside.
 */

/** Keywords a schema node may have. */
const KEYWORDS: ReadonlySet<string> = new Set([
  "type",
  "description",
  "title",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "properties",
  "required",
  "additionalProperties",
  "minProperties",
  "maxProperties",
  "items",
  "prefixItems",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "format",
  "enum",
  "const",
  "oneOf",
  "anyOf",
  "$ref",
  "$defs",
]);
/** Keywords that only annotate a schema: node-llama-cpp's grammar builder is not given them. */
const ANNOTATIONS: ReadonlySet<string> = new Set(["description", "title", "default", "examples", "$schema", "$id", "$comment"]);
/** Keywords that say what a schema allows: a schema needs one of them. */
const DEFINING: readonly string[] = ["type", "enum", "const", "oneOf", "anyOf", "$ref"];
/** Keywords after which the grammar reads nothing else of the node (annotations and, at the root, `$defs` aside). */
const EXCLUSIVE: readonly string[] = ["oneOf", "anyOf", "$ref"];
const TYPES: ReadonlySet<string> = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);
const FORMATS: ReadonlySet<string> = new Set(["date-time", "time", "date"]);
const COUNTS = ["minProperties", "maxProperties", "minItems", "maxItems", "minLength", "maxLength"] as const;

/** Largest count a `min*`/`max*` keyword may hold. */
export const MAX_SCHEMA_COUNT = 256;
/** Most nodes (schemas, nested or not) in one schema. */
export const MAX_SCHEMA_NODES = 1000;
/** Largest schema, as JSON. */
export const MAX_SCHEMA_BYTES = 32 * 1024;
/** Most `enum` values in one schema, all together (OpenAI's strict-mode limit is 500 too). */
export const MAX_ENUM_VALUES = 500;
/** Longest `enum` or `const` string. */
export const MAX_VALUE_LENGTH = 256;
/** Most alternatives a schema may keep open at once (module doc). */
export const MAX_PARSE_STATES = 64;

export type JsonSchema = Record<string, unknown>;

/** A refusal: the keyword's path from the schema's root (`properties.name.pattern`; "" for the root itself) and why. */
export interface SchemaProblem {
  path: string;
  message: string;
}

class Refused extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A property or definition name as a path segment: `.name` when plain, else quoted and cut short. */
function segment(name: string): string {
  if (/^[A-Za-z_$][\w$-]{0,63}$/.test(name)) return `.${name}`;
  return `[${JSON.stringify(name.length > 32 ? `${name.slice(0, 32)}…` : name)}]`;
}

/** A literal a grammar can write as JSON: no control characters in strings, finite numbers; `null` for none wrong. */
function badLiteral(v: unknown): string | null {
  if (typeof v === "string") {
    if (v.length > MAX_VALUE_LENGTH) return `strings of at most ${MAX_VALUE_LENGTH} characters`;
    if (/[\u0000-\u001f]/.test(v)) return "strings without control characters";
    return null;
  }
  if (typeof v === "number") return Number.isFinite(v) ? null : "finite numbers";
  if (v === null || typeof v === "boolean") return null;
  return "strings, numbers, booleans or null";
}

/** The first way `schema` leaves the subset, if any (module doc). */
export function checkJsonSchema(schema: unknown): SchemaProblem | undefined {
  try {
    if (!isObject(schema)) throw new Refused("", "expected a schema object");
    const bytes = Buffer.byteLength(JSON.stringify(schema));
    if (bytes > MAX_SCHEMA_BYTES) throw new Refused("", `${bytes} bytes of JSON; a schema holds at most ${MAX_SCHEMA_BYTES}`);
    const defs = isObject(schema.$defs) ? schema.$defs : {};
    let nodes = 0;
    let enumValues = 0;
    /** Parse states of each definition, once measured; `inside`: the definitions on the current path. */
    const defStates = new Map<string, number>();
    const inside = new Set<string>();

    /** Checks `node` at `path` and returns how many alternatives it can keep open at once. */
    const visit = (node: unknown, path: string): number => {
      const at = (key: string) => `${path}${path ? "." : ""}${key}`;
      if (!isObject(node)) throw new Refused(path, "expected a schema object");
      if (++nodes > MAX_SCHEMA_NODES) throw new Refused(path, `a schema may hold at most ${MAX_SCHEMA_NODES} nodes`);
      const keys = Object.keys(node);
      for (const key of keys)
        if (!KEYWORDS.has(key)) throw new Refused(at(key), "this keyword is not supported by structured output (the grammar could not hold the output to it)");
      if (!DEFINING.some((k) => k in node))
        throw new Refused(path, `a schema must say what it allows (one of ${DEFINING.join(", ")}); an empty schema (any value) is not supported`);
      const exclusive = EXCLUSIVE.filter((k) => k in node);
      if (exclusive.length > 1) throw new Refused(at(exclusive[1]!), `give one of ${EXCLUSIVE.join(", ")}, not several`);
      if (exclusive.length === 1) {
        const extra = keys.find((k) => k !== exclusive[0] && !ANNOTATIONS.has(k) && !(k === "$defs" && path === ""));
        if (extra) throw new Refused(at(extra), `is not read beside ${exclusive[0]} (the grammar follows ${exclusive[0]} alone); move it into the alternatives or definitions`);
      }

      if ("type" in node) {
        const types = Array.isArray(node.type) ? node.type : [node.type];
        if (types.length === 0 || types.some((t) => typeof t !== "string" || !TYPES.has(t))) throw new Refused(at("type"), `expected one or more of ${[...TYPES].join(", ")}`);
      }
      for (const key of COUNTS) {
        const value = node[key];
        if (value !== undefined && (!Number.isInteger(value) || (value as number) < 0 || (value as number) > MAX_SCHEMA_COUNT))
          throw new Refused(at(key), `expected an integer from 0 to ${MAX_SCHEMA_COUNT}`);
      }
      if ("format" in node) {
        if (typeof node.format !== "string" || !FORMATS.has(node.format)) throw new Refused(at("format"), `expected one of ${[...FORMATS].join(", ")}`);
        const limit = ["minLength", "maxLength"].find((k) => k in node);
        if (limit) throw new Refused(at(limit), "is not enforced together with format (a formatted string has its own length)");
      }
      if ("enum" in node) {
        const values = node.enum;
        if (!Array.isArray(values) || values.length === 0) throw new Refused(at("enum"), "expected a non-empty array of values");
        enumValues += values.length;
        if (enumValues > MAX_ENUM_VALUES) throw new Refused(at("enum"), `a schema may hold at most ${MAX_ENUM_VALUES} enum values in all`);
        for (const [i, v] of values.entries()) {
          const bad = badLiteral(v);
          if (bad) throw new Refused(at(`enum[${i}]`), `expected ${bad}`);
        }
      }
      if ("const" in node) {
        const bad = badLiteral(node.const);
        if (bad) throw new Refused(at("const"), `expected ${bad}`);
      }
      if ("$defs" in node) {
        if (path !== "") throw new Refused(at("$defs"), "$defs belongs at the schema's root");
        if (!isObject(node.$defs)) throw new Refused(at("$defs"), "expected an object of schemas");
        for (const name of Object.keys(node.$defs)) measureDef(name, `$defs${segment(name)}`);
      }

      let states = 1;
      const nested = (value: unknown, where: string) => {
        states = Math.max(states, visit(value, where));
      };
      if ("properties" in node) {
        if (!isObject(node.properties)) throw new Refused(at("properties"), "expected an object of schemas");
        for (const [name, sub] of Object.entries(node.properties)) nested(sub, `${at("properties")}${segment(name)}`);
      }
      if ("required" in node) {
        const names = node.required;
        if (!Array.isArray(names) || names.some((v) => typeof v !== "string")) throw new Refused(at("required"), "expected an array of property names");
        const missing = names.find((n) => !isObject(node.properties) || !Object.hasOwn(node.properties, n as string));
        if (missing !== undefined)
          throw new Refused(
            at("required"),
            `names ${JSON.stringify(String(missing).slice(0, 64))}, which is not one of the properties (every property is written, as in OpenAI's strict mode)`,
          );
      }
      if ("additionalProperties" in node && typeof node.additionalProperties !== "boolean") nested(node.additionalProperties, at("additionalProperties"));
      if ("items" in node) nested(node.items, at("items"));
      if ("prefixItems" in node) {
        if (!Array.isArray(node.prefixItems) || node.prefixItems.length === 0) throw new Refused(at("prefixItems"), "expected a non-empty array of schemas");
        node.prefixItems.forEach((sub, i) => nested(sub, `${at("prefixItems")}[${i}]`));
      }
      if (Array.isArray(node.type) && node.type.length > 1) states = node.type.length * states; // rewritten as alternatives
      for (const key of ["oneOf", "anyOf"] as const) {
        if (!(key in node)) continue;
        const alternatives = node[key];
        if (!Array.isArray(alternatives) || alternatives.length === 0) throw new Refused(at(key), "expected a non-empty array of schemas");
        states = alternatives.reduce((sum: number, sub, i) => sum + visit(sub, `${at(key)}[${i}]`), 0);
      }
      if ("$ref" in node) {
        const ref = node.$ref;
        const name = typeof ref === "string" && ref.startsWith("#/$defs/") ? ref.slice("#/$defs/".length) : undefined;
        if (name === undefined || !Object.hasOwn(defs, name)) throw new Refused(at("$ref"), "expected #/$defs/<name> of a definition in this schema's $defs");
        if (inside.has(name)) throw new Refused(at("$ref"), "recursive schemas are not supported (this reference leads back into its own definition)");
        states = measureDef(name, `$defs${segment(name)}`);
      }
      if (states > MAX_PARSE_STATES)
        throw new Refused(path, `keeps up to ${states} alternatives open at once; at most ${MAX_PARSE_STATES} are allowed (fewer or less deeply nested oneOf/anyOf/type lists)`);
      return states;
    };

    const measureDef = (name: string, path: string): number => {
      const known = defStates.get(name);
      if (known !== undefined) return known;
      inside.add(name);
      const states = visit(defs[name], path);
      inside.delete(name);
      defStates.set(name, states);
      return states;
    };

    visit(schema, "");
    return undefined;
  } catch (err) {
    if (err instanceof Refused) return { path: err.path, message: err.message };
    throw err;
  }
}

/** How many times node-llama-cpp writes an array's item type out when it documents a schema (its `maxTypeRepetition`). */
const DOCUMENTED_REPEATS = 10;
/** Largest documentation of one function's parameters for the model, in bytes (as documentedBytes estimates it). */
export const MAX_DOCUMENTED_BYTES = 64 * 1024;

/**
 * An upper estimate of the bytes a schema of the subset takes when node-llama-cpp documents it for the
 * model (a function's parameters, written as TypeScript-like types in the prompt). An array with
 * `minItems` writes its item's type out up to DOCUMENTED_REPEATS times, so nested arrays multiply: a
 * 428-byte schema of seven such levels documents as 39 MB. Walked without recursion.
 */
export function documentedBytes(schema: unknown): number {
  let total = 0;
  const stack: [unknown, number][] = [[schema, 1]];
  while (stack.length > 0 && total <= Number.MAX_SAFE_INTEGER) {
    const [node, times] = stack.pop()!;
    if (!isObject(node)) continue;
    let own = 16;
    for (const [key, value] of Object.entries(node)) {
      if ((key === "properties" || key === "$defs") && isObject(value)) {
        for (const [name, sub] of Object.entries(value)) {
          own += name.length + 4;
          stack.push([sub, times]);
        }
      } else if (key === "items" || key === "additionalProperties") {
        const repeats = key === "items" && typeof node.minItems === "number" ? Math.min(Math.max(node.minItems, 0), DOCUMENTED_REPEATS) + 1 : 1;
        stack.push([value, times * repeats]);
      } else if ((key === "prefixItems" || key === "oneOf" || key === "anyOf") && Array.isArray(value)) {
        for (const sub of value) stack.push([sub, times]);
      } else own += key.length + (JSON.stringify(value)?.length ?? 0);
    }
    total += own * times;
  }
  return total;
}

/** Why a function's parameters are refused when their documentation would be larger than MAX_DOCUMENTED_BYTES. */
export function documentationTooLarge(schema: unknown): string {
  return `documented for the model, these parameters would take about ${documentedBytes(schema)} bytes of prompt (an array with minItems writes its item's type out up to ${DOCUMENTED_REPEATS} times, nested arrays multiply); at most ${MAX_DOCUMENTED_BYTES}`;
}

/**
 * A schema of the subset (checked by checkJsonSchema) as node-llama-cpp's grammar builder reads it:
 * `anyOf` as `oneOf` (a grammar alternates either way), a list of types as alternatives of one type
 * each (node-llama-cpp would drop the other keywords), annotations dropped; with `descriptions`,
 * `description` kept (a function's parameters: node-llama-cpp shows them to the model).
 */
export function toGrammarSchema(schema: unknown, options: { descriptions?: boolean } = {}): unknown {
  if (!isObject(schema)) return schema;
  const sub = (v: unknown) => toGrammarSchema(v, options);
  const byName = (v: unknown) => Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([name, s]) => [name, sub(s)]));
  const entries: [string, unknown][] = [];
  for (const [key, value] of Object.entries(schema)) {
    if (ANNOTATIONS.has(key) && !(options.descriptions && key === "description" && typeof value === "string")) continue;
    if (key === "properties" || key === "$defs") entries.push([key, byName(value)]);
    else if (key === "items" || key === "additionalProperties") entries.push([key, sub(value)]);
    else if (key === "oneOf" || key === "anyOf" || key === "prefixItems") entries.push([key === "anyOf" ? "oneOf" : key, (value as unknown[]).map(sub)]);
    else entries.push([key, value]);
  }
  const out = Object.fromEntries(entries) as Record<string, unknown>;
  if ("enum" in out || "const" in out) delete out.type; // the values say it all (node-llama-cpp reads them alone)
  if (Array.isArray(out.type) && out.type.length > 1) {
    const { type, $defs, ...rest } = out;
    const alternatives = (type as string[]).map((t) => ({ type: t, ...Object.fromEntries(Object.entries(rest).filter(([k]) => APPLIES[t]?.includes(k))) }));
    return { ...($defs ? { $defs } : {}), oneOf: alternatives };
  }
  if (Array.isArray(out.type)) out.type = out.type[0];
  return out;
}

/** The keywords that belong to each type, when a list of types becomes one alternative per type. */
const APPLIES: Readonly<Record<string, readonly string[]>> = {
  object: ["properties", "required", "additionalProperties", "minProperties", "maxProperties"],
  array: ["items", "prefixItems", "minItems", "maxItems"],
  string: ["minLength", "maxLength", "format"],
};

/** A tool function's name, as OpenAI allows it: 1 to 64 letters, digits, `_` or `-`. */
export const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A tool's `parameters`, checked once for both sides (the scheduler's validation, the agent's
 * re-check of the wire): the grammar's schema subset, an object at the root, and documentation
 * that fits the prompt. The first problem, with its path in the schema ("" at the root).
 */
export function checkToolParameters(schema: unknown): SchemaProblem | undefined {
  const problem = checkJsonSchema(schema);
  if (problem) return problem;
  if ((schema as Record<string, unknown>).type !== "object") return { path: "type", message: 'must be "object": the arguments are a JSON object' };
  if (documentedBytes(schema) > MAX_DOCUMENTED_BYTES) return { path: "", message: documentationTooLarge(schema) };
  return undefined;
}

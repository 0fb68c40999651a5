/**
 * The JSON Schema subset structured output is held to: what node-llama-cpp turns into a llama.cpp
 * grammar (its `GbnfJsonSchema`), plus `anyOf` (the same alternation as `oneOf` for a grammar) and
 * annotations that change nothing (`title`, `default`, `examples`, `$schema`, `$id`). A keyword
 * outside it (`pattern`, `minimum`, `allOf`, …) would be ignored by the grammar, so the output could
 * break the schema the client relies on: it is refused instead, naming its path.
 *
 * Tenants are hostile: a schema is bounded in nodes and in repetition counts (llama.cpp expands
 * `x{m,n}` into rules, one per count), and `$ref` points only into the schema's own `$defs`.
 */

/** Keywords a schema node may have. */
const KEYWORDS: ReadonlySet<string> = new Set([
  "type", "description", "title", "default", "examples", "$schema", "$id", "$comment",
  "properties", "required", "additionalProperties", "minProperties", "maxProperties",
  "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "format",
  "enum", "const", "oneOf", "anyOf", "$ref", "$defs",
]);
const TYPES: ReadonlySet<string> = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);
const FORMATS: ReadonlySet<string> = new Set(["date-time", "time", "date"]);
const COUNTS = ["minProperties", "maxProperties", "minItems", "maxItems", "minLength", "maxLength"] as const;

/** Largest count a `min*`/`max*` keyword may hold. */
export const MAX_SCHEMA_COUNT = 256;
/** Most nodes (schemas, nested or not) in one schema. */
export const MAX_SCHEMA_NODES = 1000;

export type JsonSchema = Record<string, unknown>;

/** A refusal: the keyword's path from the schema's root (`properties.name.pattern`; "" for the root itself) and why. */
export interface SchemaProblem { path: string; message: string }

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The first way `schema` leaves the subset, if any. */
export function checkJsonSchema(schema: unknown): SchemaProblem | undefined {
  let nodes = 0;
  const defs = isObject(schema) && isObject(schema.$defs) ? schema.$defs : {};
  const visit = (node: unknown, path: string): SchemaProblem | undefined => {
    const at = (key: string) => (path ? `${path}.${key}` : key);
    if (node === true || node === false) return undefined;
    if (!isObject(node)) return { path, message: "expected a schema object" };
    if (++nodes > MAX_SCHEMA_NODES) return { path, message: `a schema may hold at most ${MAX_SCHEMA_NODES} nodes` };
    if ("oneOf" in node && "anyOf" in node) return { path: at("anyOf"), message: "give oneOf or anyOf, not both" };
    for (const [key, value] of Object.entries(node)) {
      if (!KEYWORDS.has(key)) return { path: at(key), message: "this keyword is not supported by structured output (the grammar could not hold the output to it)" };
      if (key === "type") {
        const types = Array.isArray(value) ? value : [value];
        if (types.length === 0 || types.some((t) => typeof t !== "string" || !TYPES.has(t))) return { path: at(key), message: `expected one or more of ${[...TYPES].join(", ")}` };
      } else if ((COUNTS as readonly string[]).includes(key)) {
        if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > MAX_SCHEMA_COUNT) return { path: at(key), message: `expected an integer from 0 to ${MAX_SCHEMA_COUNT}` };
      } else if (key === "format") {
        if (typeof value !== "string" || !FORMATS.has(value)) return { path: at(key), message: `expected one of ${[...FORMATS].join(", ")}` };
      } else if (key === "$ref") {
        const name = typeof value === "string" && value.startsWith("#/$defs/") ? value.slice("#/$defs/".length) : undefined;
        if (name === undefined || !Object.hasOwn(defs, name)) return { path: at(key), message: "expected #/$defs/<name> of a definition in this schema's $defs" };
      } else if (key === "properties" || key === "$defs") {
        if (!isObject(value)) return { path: at(key), message: "expected an object of schemas" };
        if (key === "$defs" && path !== "") return { path: at(key), message: "$defs belongs at the schema's root" };
        for (const [name, sub] of Object.entries(value)) {
          const problem = visit(sub, `${at(key)}.${name}`);
          if (problem) return problem;
        }
      } else if (key === "items" || key === "additionalProperties") {
        const problem = visit(value, at(key));
        if (problem) return problem;
      } else if (key === "prefixItems" || key === "oneOf" || key === "anyOf") {
        if (!Array.isArray(value) || value.length === 0) return { path: at(key), message: "expected a non-empty array of schemas" };
        for (const [i, sub] of value.entries()) {
          const problem = visit(sub, `${at(key)}[${i}]`);
          if (problem) return problem;
        }
      } else if (key === "enum") {
        if (!Array.isArray(value) || value.length === 0 || value.some((v) => v !== null && typeof v === "object")) return { path: at(key), message: "expected a non-empty array of strings, numbers, booleans or nulls" };
      } else if (key === "const") {
        if (value !== null && typeof value === "object") return { path: at(key), message: "expected a string, number, boolean or null" };
      } else if (key === "required") {
        if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) return { path: at(key), message: "expected an array of property names" };
      }
    }
    return undefined;
  };
  return visit(schema, "");
}

/** Keywords that only annotate a schema: node-llama-cpp's grammar builder is not given them. */
const ANNOTATIONS: ReadonlySet<string> = new Set(["title", "default", "examples", "$schema", "$id", "$comment"]);

/**
 * A schema of the subset (checked by checkJsonSchema) as node-llama-cpp's grammar builder reads it:
 * `anyOf` as `oneOf` (a grammar alternates either way), annotations dropped.
 */
export function toGrammarSchema(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const byName = (v: unknown) => Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([name, sub]) => [name, toGrammarSchema(sub)]));
  const entries: [string, unknown][] = [];
  for (const [key, value] of Object.entries(schema)) {
    if (ANNOTATIONS.has(key)) continue;
    if (key === "properties" || key === "$defs") entries.push([key, byName(value)]);
    else if (key === "items" || key === "additionalProperties") entries.push([key, toGrammarSchema(value)]);
    else if (key === "oneOf" || key === "anyOf" || key === "prefixItems") entries.push([key === "anyOf" ? "oneOf" : key, (value as unknown[]).map(toGrammarSchema)]);
    else entries.push([key, value]);
  }
  return Object.fromEntries(entries);
}

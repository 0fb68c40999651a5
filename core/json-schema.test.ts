/** The JSON Schema subset of structured output: what passes, what is refused by path, and what the grammar builder is given. */
import { describe, expect, it } from "vitest";
import { checkJsonSchema, MAX_SCHEMA_NODES, toGrammarSchema } from "./json-schema.js";

describe("checkJsonSchema", () => {
  it("passes the subset, recursive definitions included", () => {
    expect(checkJsonSchema({
      $schema: "https://json-schema.org/draft/2020-12/schema", title: "T", type: "object",
      properties: { a: { type: ["string", "null"], maxLength: 5 }, b: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] }, c: { enum: [1, "x", null] }, d: { type: "string", format: "date" } },
      required: ["a"], additionalProperties: false,
      $defs: { node: { type: "object", properties: { next: { oneOf: [{ $ref: "#/$defs/node" }, { const: null }] } } } },
    })).toBeUndefined();
  });

  it.each([
    [{ type: "string", pattern: "a" }, "pattern"],
    [{ type: "object", properties: { x: { allOf: [] } } }, "properties.x.allOf"],
    [{ type: "array", prefixItems: [{ type: "number", minimum: 0 }] }, "prefixItems[0].minimum"],
    [{ type: "array", maxItems: 257 }, "maxItems"],
    [{ $ref: "#/definitions/x" }, "$ref"],
    [{ $ref: "#/$defs/constructor" }, "$ref"],
    [{ type: "object", properties: { x: { $defs: {} } } }, "properties.x.$defs"],
    [{ oneOf: [{ type: "null" }], anyOf: [{ type: "null" }] }, "anyOf"],
    [{ type: "string", format: "email" }, "format"],
    [{ enum: [{ a: 1 }] }, "enum"],
    [[], ""],
  ])("refuses %j at %s", (schema, path) => {
    expect(checkJsonSchema(schema)?.path).toBe(path);
  });

  it("refuses a schema of more than MAX_SCHEMA_NODES nodes", () => {
    const properties = Object.fromEntries(Array.from({ length: MAX_SCHEMA_NODES }, (_, i) => [`p${i}`, { type: "string" }]));
    expect(checkJsonSchema({ type: "object", properties })?.message).toMatch(/at most 1000 nodes/);
  });
});

describe("toGrammarSchema", () => {
  it("reads anyOf as oneOf and drops annotations, but never a property that happens to be named like one", () => {
    expect(toGrammarSchema({ title: "T", type: "object", properties: { title: { type: "string", default: "x" }, v: { anyOf: [{ type: "null" }, { type: "integer" }] } } }))
      .toEqual({ type: "object", properties: { title: { type: "string" }, v: { oneOf: [{ type: "null" }, { type: "integer" }] } } });
  });
});

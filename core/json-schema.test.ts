/** The JSON Schema subset of structured output: what passes, what is refused by path (each attack of the hostile review among them), and what the grammar builder is given. */
import { describe, expect, it } from "vitest";
import { checkJsonSchema, MAX_ENUM_VALUES, MAX_SCHEMA_NODES, toGrammarSchema } from "./json-schema.js";

/** Definitions D1..Dk, each `alternatives` arrays that start with the previous one: nested, overlapping alternatives. */
function ambiguous(depth: number, alternatives: number) {
  const $defs: Record<string, unknown> = { D0: { type: "string" } };
  for (let k = 1; k <= depth; k++)
    $defs[`D${k}`] = { oneOf: Array.from({ length: alternatives }, (_, i) => ({ type: "array", prefixItems: [{ $ref: `#/$defs/D${k - 1}` }, { const: i }] })) };
  return { $ref: `#/$defs/D${depth}`, $defs };
}

describe("checkJsonSchema", () => {
  it("passes the subset: OpenAI strict-mode shapes, nullable fields, definitions", () => {
    expect(
      checkJsonSchema({
        $schema: "https://json-schema.org/draft/2020-12/schema",
        title: "T",
        type: "object",
        properties: {
          a: { type: ["string", "null"], maxLength: 5 },
          b: { anyOf: [{ $ref: "#/$defs/point" }, { type: "null" }] },
          c: { type: "string", enum: ["x", "y"] },
          d: { type: "string", format: "date" },
          e: { type: "array", items: { type: "integer" }, maxItems: 3 },
        },
        required: ["a", "b", "c", "d", "e"],
        additionalProperties: false,
        $defs: { point: { type: "object", properties: { x: { type: "number" }, y: { type: "number" } }, additionalProperties: false } },
      }),
    ).toBeUndefined();
    expect(checkJsonSchema(ambiguous(6, 2))).toBeUndefined(); // 2^6 = 64 alternatives at most: allowed
  });

  it.each([
    [{ type: "string", pattern: "a" }, "pattern", /not supported/],
    [{ type: "object", properties: { x: { allOf: [] } } }, "properties.x.allOf", /not supported/],
    [{ type: "array", prefixItems: [{ type: "number", minimum: 0 }] }, "prefixItems[0].minimum", /not supported/],
    [{ type: "array", maxItems: 257 }, "maxItems", /0 to 256/],
    [{ $ref: "#/definitions/x" }, "$ref", /\$defs/],
    [{ $ref: "#/$defs/constructor" }, "$ref", /\$defs/],
    [{ type: "object", properties: { x: { type: "object", $defs: {} } } }, "properties.x.$defs", /root/],
    [{ oneOf: [{ type: "null" }], anyOf: [{ type: "null" }] }, "anyOf", /not several/],
    [{ type: "string", format: "email" }, "format", /date-time, time, date/],
    [{ enum: [{ a: 1 }] }, "enum[0]", /strings, numbers/],
    [[], "", /schema object/],
    // the hostile review's findings
    [ambiguous(2, 10), "$defs.D2", /100 alternatives open at once; at most 64/],
    [ambiguous(7, 2), "$defs.D7", /128 alternatives/],
    [
      {
        type: "object",
        properties: { n: { $ref: "#/$defs/node" } },
        $defs: { node: { type: "object", properties: { next: { anyOf: [{ type: "null" }, { $ref: "#/$defs/node" }] } } } },
      },
      "$defs.node.properties.next.anyOf[1].$ref",
      /recursive/,
    ],
    [{ enum: Array.from({ length: MAX_ENUM_VALUES + 1 }, (_, i) => `v${i}`) }, "enum", /at most 500 enum values/],
    [{ type: "object", properties: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`p${i}`, { type: "string", description: "x".repeat(100) }])) }, "", /bytes of JSON/],
    [{}, "", /empty schema/],
    [{ type: "object", properties: { x: {} } }, "properties.x", /empty schema/],
    [{ type: "object", properties: { x: { description: "only words" } } }, "properties.x", /empty schema/],
    [{ type: "array", items: true }, "items", /schema object/],
    [{ $ref: "#/$defs/a", type: "string", $defs: { a: { type: "string" } } }, "type", /not read beside \$ref/],
    [{ oneOf: [{ type: "string" }], maxLength: 3 }, "maxLength", /not read beside oneOf/],
    [{ type: "object", properties: { a: { type: "string" } }, required: ["a", "b"] }, "required", /"b", which is not one of the properties/],
    [{ type: "string", format: "date", maxLength: 3 }, "maxLength", /format/],
    [{ const: "a\u0001b" }, "const", /control characters/],
    [{ enum: ["ok", JSON.parse("1e400") as number] }, "enum[1]", /finite numbers/],
    [{ type: "object", properties: { ["p".repeat(1000)]: { type: "string", pattern: "x" } } }, `properties["${"p".repeat(32)}…"].pattern`, /not supported/],
  ])("refuses %j at %s", (schema, path, message) => {
    const problem = checkJsonSchema(schema);
    expect(problem?.path).toBe(path);
    expect(problem?.message).toMatch(message);
  });

  it("refuses a schema of more than MAX_SCHEMA_NODES nodes", () => {
    const properties = Object.fromEntries(Array.from({ length: MAX_SCHEMA_NODES }, (_, i) => [`p${i}`, { type: "null" }]));
    expect(checkJsonSchema({ type: "object", properties })?.message).toMatch(/at most 1000 nodes/);
  });
});

describe("toGrammarSchema", () => {
  it("reads anyOf as oneOf and drops annotations, but never a property that happens to be named like one", () => {
    expect(toGrammarSchema({ title: "T", type: "object", properties: { title: { type: "string", default: "x" }, v: { anyOf: [{ type: "null" }, { type: "integer" }] } } })).toEqual(
      { type: "object", properties: { title: { type: "string" }, v: { oneOf: [{ type: "null" }, { type: "integer" }] } } },
    );
  });

  it("turns a list of types into one alternative per type, each with its own keywords (node-llama-cpp would keep only null)", () => {
    expect(toGrammarSchema({ type: ["object", "null"], properties: { a: { type: "string" } }, additionalProperties: false })).toEqual({
      oneOf: [{ type: "object", properties: { a: { type: "string" } }, additionalProperties: false }, { type: "null" }],
    });
    expect(toGrammarSchema({ type: ["string", "null"], maxLength: 2 })).toEqual({ oneOf: [{ type: "string", maxLength: 2 }, { type: "null" }] });
    expect(toGrammarSchema({ type: ["string", "null"], enum: ["a", null] })).toEqual({ enum: ["a", null] });
  });
});

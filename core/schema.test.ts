/** Zod issues as the error contract's errors: the code by kind of failure, the message and param by field path. */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { fieldPath, parseBody, refusal } from "./schema.js";

const Body = z.looseObject({
  name: z.string({ error: "a string" }),
  size: z.int({ error: "an integer from 1 to 9" }).min(1).max(9).nullish(),
  kind: z.enum(["a", "b"], { error: "one of a, b" }).nullish(),
  list: z.union([z.string(), z.array(z.string({ error: "a string" }).max(3)).max(2, { error: "at most 2 items" })], { error: "a string or a list" }).nullish(),
  map: z.record(z.string({ error: "a digit" }).regex(/^\d$/), z.number({ error: "a number" })).nullish(),
  id: z
    .string()
    .refine(
      (v) => v === "ok",
      refusal("invalid_value", (i) => `${String(i.input)} is not ok`),
    )
    .nullish(),
});

const refused = (body: unknown) => {
  try {
    parseBody(Body, body);
  } catch (err) {
    const e = err as { code: string; message: string; field: string };
    return { code: e.code, message: e.message, field: e.field };
  }
  throw new Error("accepted");
};

describe("parseBody", () => {
  it("returns the parsed body, unknown members kept", () => {
    expect(parseBody(Body, { name: "x", size: 3, extra: true })).toEqual({ name: "x", size: 3, extra: true });
  });

  it.each([
    [[], "invalid_type", "body: expected a JSON object, got array", "body"],
    [{}, "missing_required_field", "name: is required", "name"],
    [{ name: null }, "missing_required_field", "name: is required", "name"],
    [{ name: 1 }, "invalid_type", "name: expected a string, got number", "name"],
    [{ name: "x", size: 10 }, "invalid_size", "size: expected an integer from 1 to 9, got 10", "size"],
    [{ name: "x", size: 1.5 }, "invalid_size", "size: expected an integer from 1 to 9, got 1.5", "size"],
    [{ name: "x", size: "1" }, "invalid_type", "size: expected an integer from 1 to 9, got string", "size"],
    [{ name: "x", kind: "c" }, "invalid_kind", 'kind: expected one of a, b, got "c"', "kind"],
    [{ name: "x", kind: 5 }, "invalid_type", "kind: expected one of a, b, got number", "kind"],
    [{ name: "x", list: 5 }, "invalid_type", "list: expected a string or a list, got number", "list"],
    [{ name: "x", list: ["a", "b", "c"] }, "invalid_list", "list: expected at most 2 items, got 3 items", "list"],
    [{ name: "x", list: ["a", 5] }, "invalid_type", "list[1]: expected a string, got number", "list[1]"],
    [{ name: "x", list: ["abcd"] }, "invalid_list", 'list[0]: expected a string, got "abcd"', "list[0]"],
    [{ name: "x", map: { x: 1 } }, "invalid_map", 'map: expected keys that are a digit, got "x"', "map"],
    [{ name: "x", map: { 1: "y" } }, "invalid_type", "map.1: expected a number, got string", "map.1"],
    [{ name: "x", id: "no" }, "invalid_value", "id: no is not ok", "id"],
  ])("refuses %j with %s", (body, code, message, field) => {
    expect(refused(body)).toEqual({ code, message, field });
  });

  it("writes paths as a client reads them", () => {
    expect(fieldPath(["messages", 0, "content", 2, "text"])).toBe("messages[0].content[2].text");
    expect(fieldPath([])).toBe("body");
  });
});

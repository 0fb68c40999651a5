import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "./errors.js";
import { withoutStackTraces } from "./stackless.js";

describe("withoutStackTraces", () => {
  it("returns what the work returns", () => {
    expect(withoutStackTraces(() => 42)).toBe(42);
  });

  it("throws a refusal (an ApiError) as it was made, without stack frames, and restores the stack trace limit", () => {
    const limit = Error.stackTraceLimit;
    let thrown: unknown;
    try {
      withoutStackTraces(() => {
        throw new InvalidRequestError("invalid_messages", "messages: expected at least one message");
      });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(InvalidRequestError);
    expect((thrown as Error).message).toBe("messages: expected at least one message");
    expect((thrown as Error).stack).not.toMatch(/\n\s+at /);
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new Error("x").stack).toMatch(/\n\s+at /);
  });

  it("a fault (anything else) comes with its stack, for the log", () => {
    const fault = () => withoutStackTraces(() => (null as unknown as { a: number }).a);
    expect(fault).toThrow(TypeError);
    try {
      fault();
    } catch (err) {
      expect((err as Error).stack).toMatch(/\n\s+at .*stackless\.test\.ts/);
    }
  });
});

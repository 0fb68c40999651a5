/** The Error body of an invalid request: `param` names the field at fault. */
import { describe, expect, it } from "vitest";
import { InvalidRequestError, NotFoundError } from "./errors.js";

describe("InvalidRequestError.toBody", () => {
  it("carries the given field as param, else the path its message starts with, else null", () => {
    expect(new InvalidRequestError("invalid_stop", "stop[0]: must be 1 to 256 characters", "stop").toBody().error).toEqual({
      type: "invalid_request_error",
      code: "invalid_stop",
      message: "stop[0]: must be 1 to 256 characters",
      param: "stop",
    });
    expect(new InvalidRequestError("invalid_value", "messages[2].content[0].text: expected a string").toBody().error.param).toBe("messages[2].content[0].text");
    expect(new InvalidRequestError("invalid_value", "config.authentication.token_env: unknown").toBody().error.param).toBe("config.authentication.token_env");
    expect(new InvalidRequestError("invalid_value", "the body is not JSON at all").toBody().error.param).toBeNull();
  });

  it("is the only error body whose param names a field: every other has param null (OpenAI's ErrorObject requires the member)", () => {
    expect(new NotFoundError("model_not_found", "model: nope").toBody().error.param).toBeNull();
  });
});

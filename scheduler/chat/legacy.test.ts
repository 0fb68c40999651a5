/** Legacy completion bodies: what is taken as given, and every refusal's code and message (field first). */
import { describe, expect, it } from "vitest";
import { LEGACY_DEFAULT_MAX_TOKENS, legacyLogprobs, validateLegacyCompletion } from "./legacy.js";

const base = { model: "famB-v3.1", prompt: "Once upon" };

describe("validateLegacyCompletion", () => {
  it("takes the prompt (a list of one too), OpenAI's default max_tokens, echo, the legacy logprobs count and the sampling fields", () => {
    expect(validateLegacyCompletion(base)).toEqual({
      model: "famB-v3.1",
      requestedModel: "famB-v3.1",
      messages: [],
      prompt: "Once upon",
      maxTokens: LEGACY_DEFAULT_MAX_TOKENS,
      stream: false,
      includeUsage: false,
      echo: false,
      ignored: [],
    });
    expect(
      validateLegacyCompletion({
        ...base,
        prompt: ["a"],
        max_tokens: 5,
        echo: true,
        temperature: 0,
        seed: 3,
        stop: "\n",
        stream: true,
        stream_options: { include_usage: true },
        user: "u",
      }),
    ).toEqual({
      model: "famB-v3.1",
      requestedModel: "famB-v3.1",
      messages: [],
      prompt: "a",
      maxTokens: 5,
      temperature: 0,
      sampling: { seed: 3, stop: ["\n"] },
      stream: true,
      includeUsage: true,
      echo: true,
      ignored: ["user"],
    });
    expect(validateLegacyCompletion({ ...base, logprobs: 2 }).logprobs).toBe(2);
    expect(validateLegacyCompletion({ ...base, n: 1, best_of: 1, suffix: "" })).not.toHaveProperty("logprobs");
  });

  it.each([
    [{ model: "famB-v3.1" }, "missing_required_field", "prompt: is required"],
    [{ ...base, prompt: "" }, "invalid_prompt", 'prompt: expected a non-empty string, got ""'],
    [{ ...base, prompt: ["a", "b"] }, "unsupported_parameter", "prompt: a list of 2 prompts is not supported; send one"],
    [{ ...base, prompt: [[1, 2]] }, "invalid_type", "prompt[0]: expected a non-empty string, got array"],
    [{ ...base, prompt: 5 }, "invalid_type", "prompt: expected a string, got number"],
    [{ ...base, n: 17 }, "invalid_n", "n: expected an integer from 1 to 16, got 17"],
    [{ ...base, best_of: 3 }, "unsupported_parameter", "best_of: best_of above 1 is not supported"],
    [{ ...base, suffix: "end" }, "unsupported_parameter", 'suffix: insertion (a suffix of "end") is not supported'],
    [{ ...base, logprobs: 6 }, "invalid_logprobs", "logprobs: expected an integer from 0 to 5, got 6"],
    [{ ...base, logprobs: 1, echo: true }, "unsupported_parameter", "echo: with logprobs is not supported (the prompt's tokens are not scored); send one of them"],
    [{ ...base, logprobs: true }, "invalid_type", "logprobs: expected an integer from 0 to 5, got boolean"],
    [{ ...base, temperature: 3 }, "invalid_temperature", "temperature: expected a number from 0 to 2, got 3"],
    [{ model: "gpt-3.5-turbo-instruct", prompt: "x" }, "model_not_found", 'model: "gpt-3.5-turbo-instruct" is not a model of this service (see GET /v1/models)'],
  ])("refuses %j with %s", (body, code, message) => {
    expect(() => validateLegacyCompletion(body)).toThrow(expect.objectContaining({ status: 400, code, message }));
  });
});

describe("legacyLogprobs", () => {
  it("gives OpenAI's parallel lists, with each token's offset in the text", () => {
    const entries = [
      {
        token: "Once",
        logprob: -0.5,
        top_logprobs: [
          { token: "Once", logprob: -0.5 },
          { token: "Hi", logprob: -2 },
        ],
        text_offset: 0,
      },
      { token: " up", logprob: -1, top_logprobs: [], text_offset: 4 },
    ];
    expect(legacyLogprobs(entries, 3)).toEqual({ tokens: ["Once", " up"], token_logprobs: [-0.5, -1], top_logprobs: [{ Once: -0.5, Hi: -2 }, {}], text_offset: [3, 7] });
    // the three byte tokens of one character share its offset (each one's own text is U+FFFD)
    const bytes = [0, 0, 0].map(() => ({ token: "\uFFFD", logprob: -1, top_logprobs: [], text_offset: 2 }));
    expect(legacyLogprobs([...bytes, { token: "!", logprob: -1, top_logprobs: [], text_offset: 3 }], 0).text_offset).toEqual([2, 2, 2, 3]);
  });

  it("keeps the most likely of alternatives that share a text, in order, and takes __proto__ as a plain key", () => {
    const top = [
      { token: "\uFFFD", logprob: -1 },
      { token: "a", logprob: -2 },
      { token: "\uFFFD", logprob: -3 },
      { token: "__proto__", logprob: -4 },
    ];
    const [alternatives] = legacyLogprobs([{ token: "\uFFFD", logprob: -1, top_logprobs: top, text_offset: 0 }], 0).top_logprobs;
    expect(JSON.stringify(alternatives)).toBe('{"\uFFFD":-1,"a":-2,"__proto__":-4}'.replace("\\uFFFD", "\uFFFD"));
  });
});

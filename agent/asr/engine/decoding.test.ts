/** The upload form's fields: what each decoding choice becomes, and each refusal naming its field. */
import { describe, expect, it } from "vitest";
import { engineParams, nativeDecoding } from "./whisper-protocol.js";
import { MAX_PROMPT_CHARS, parseJobFields } from "../../../speech/fields.js";

describe("parseJobFields: decoding options", () => {
  it("takes the prompt (after the hotwords), temperatures, thresholds and the voice-activity settings", () => {
    const options = parseJobFields({
      prompt: "Kiln, whisper.cpp and llama.cpp.",
      hotwords: "Ollama GPUStack",
      temperature: "0.2",
      temperature_increment: "0",
      entropy_threshold: "2.2",
      logprob_threshold: "-0.8",
      no_speech_threshold: ".5",
      vad_threshold: "0.35",
      min_silence_ms: "250",
    });
    // hotwords last: whisper keeps the end of a prompt longer than its 224 tokens
    expect(options.decoding).toEqual({
      prompt: "Kiln, whisper.cpp and llama.cpp. Ollama GPUStack",
      temperature: 0.2,
      temperatureIncrement: 0,
      entropyThreshold: 2.2,
      logprobThreshold: -0.8,
      noSpeechThreshold: 0.5,
    });
    expect(parseJobFields({ temperature_increment: "0.2" }).decoding).toEqual({ temperatureIncrement: 0.2 });
    expect(options.vad).toEqual({ threshold: 0.35, minSilenceSeconds: 0.25 });
    const plain = parseJobFields({});
    expect(plain).not.toHaveProperty("decoding");
    expect(plain).not.toHaveProperty("vad");
  });

  it("gives the whisper addon its own names for them, and nothing it was not asked for", () => {
    expect(nativeDecoding({ prompt: "p", temperature: 0.4, temperatureIncrement: 0, entropyThreshold: 2, logprobThreshold: -2, noSpeechThreshold: 0.7 })).toEqual({
      prompt: "p",
      temperature: 0.4,
      temperatureInc: 0,
      entropyThreshold: 2,
      logprobThreshold: -2,
      noSpeechThreshold: 0.7,
    });
    expect(nativeDecoding({})).toEqual({});
    expect(nativeDecoding(undefined)).toEqual({});
  });

  it("lets the operator's fallback setting win over a request's step", () => {
    const params = { translate: false, decoding: { temperatureIncrement: 0.4 } };
    expect(engineParams({ threads: 2, temperatureFallback: false }, params)).toMatchObject({ temperatureInc: 0 });
    expect(engineParams({ threads: 2, temperatureFallback: true }, params)).toMatchObject({ temperatureInc: 0.4, language: "auto", threads: 2 });
  });

  it.each([
    [{ temperature: "1.5" }, "invalid_temperature", 'temperature: expected a number from 0 to 1, got "1.5"'],
    [{ temperature: "hot" }, "invalid_temperature", 'temperature: expected a number from 0 to 1, got "hot"'],
    [{ temperature: "1e400" }, "invalid_temperature", 'temperature: expected a number from 0 to 1, got "1e400"'],
    [{ temperature_increment: "-0.1" }, "invalid_temperature_increment", 'temperature_increment: expected a number from 0 to 1, got "-0.1"'],
    // a step too small for single precision never reaches 1: whisper.cpp's list of temperatures grew until memory ran out
    [{ temperature_increment: "0.00000001" }, "invalid_temperature_increment", 'temperature_increment: expected 0 (no fallback) or a number from 0.2 to 1, got "0.00000001"'],
    [{ temperature_increment: "0.01" }, "invalid_temperature_increment", 'temperature_increment: expected 0 (no fallback) or a number from 0.2 to 1, got "0.01"'],
    [{ entropy_threshold: "5" }, "invalid_entropy_threshold", 'entropy_threshold: expected a number from 0 to 4, got "5"'],
    [{ logprob_threshold: "0" }, "invalid_logprob_threshold", 'logprob_threshold: expected a number from -10 to -0.1, got "0"'],
    [{ no_speech_threshold: "NaN" }, "invalid_no_speech_threshold", 'no_speech_threshold: expected a number from 0 to 1, got "NaN"'],
    [{ vad_threshold: "1" }, "invalid_vad_threshold", 'vad_threshold: expected a number from 0.05 to 0.95, got "1"'],
    [{ min_silence_ms: "99999" }, "invalid_min_silence_ms", 'min_silence_ms: expected a number from 0 to 10000, got "99999"'],
    [
      { prompt: "x".repeat(MAX_PROMPT_CHARS + 1) },
      "invalid_prompt",
      `prompt: at most ${MAX_PROMPT_CHARS} characters together, got ${MAX_PROMPT_CHARS + 1} (whisper keeps the last 224 tokens)`,
    ],
    [
      { prompt: "x".repeat(600), hotwords: "y".repeat(600) },
      "invalid_prompt",
      `prompt, hotwords: at most ${MAX_PROMPT_CHARS} characters together, got 1201 (whisper keeps the last 224 tokens)`,
    ],
    [{ prompt: "a\u0000b" }, "invalid_prompt", "prompt: control characters are not allowed"],
    [{ hotwords: "a\u001bb" }, "invalid_prompt", "prompt: control characters are not allowed"],
  ])("refuses %j with %s", (fields, code, message) => {
    expect(() => parseJobFields(fields)).toThrow(expect.objectContaining({ status: 400, code, message }));
  });
});

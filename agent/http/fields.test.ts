/** The upload form's fields: what each decoding choice becomes, and each refusal naming its field. */
import { describe, expect, it } from "vitest";
import { nativeDecoding } from "../asr/engine/whisper-protocol.js";
import { MAX_PROMPT_CHARS, parseJobFields } from "./fields.js";

describe("parseJobFields: decoding options", () => {
  it("takes the prompt (after the hotwords), temperatures, thresholds and the voice-activity settings", () => {
    const options = parseJobFields({
      prompt: "Kiln, whisper.cpp and llama.cpp.", hotwords: "Ollama GPUStack", temperature: "0.2", temperature_increment: "0",
      compression_ratio_threshold: "2.2", logprob_threshold: "-0.8", no_speech_threshold: ".5", vad_threshold: "0.35", min_silence_ms: "250",
    });
    expect(options.decoding).toEqual({ prompt: "Ollama GPUStack Kiln, whisper.cpp and llama.cpp.", temperature: 0.2, temperatureIncrement: 0, compressionRatioThreshold: 2.2, logprobThreshold: -0.8, noSpeechThreshold: 0.5 });
    expect(options.vad).toEqual({ threshold: 0.35, minSilenceSeconds: 0.25 });
    const plain = parseJobFields({});
    expect(plain).not.toHaveProperty("decoding");
    expect(plain).not.toHaveProperty("vad");
  });

  it("gives the whisper addon its own names for them, and nothing it was not asked for", () => {
    expect(nativeDecoding({ prompt: "p", temperature: 0.4, temperatureIncrement: 0, compressionRatioThreshold: 2, logprobThreshold: -2, noSpeechThreshold: 0.7 }))
      .toEqual({ prompt: "p", temperature: 0.4, temperatureInc: 0, entropyThreshold: 2, logprobThreshold: -2, noSpeechThreshold: 0.7 });
    expect(nativeDecoding({})).toEqual({});
    expect(nativeDecoding(undefined)).toEqual({});
  });

  it.each([
    [{ temperature: "1.5" }, "invalid_temperature", 'temperature: expected a number from 0 to 1, got "1.5"'],
    [{ temperature: "hot" }, "invalid_temperature", 'temperature: expected a number from 0 to 1, got "hot"'],
    [{ temperature: "1e400" }, "invalid_temperature", 'temperature: expected a number from 0 to 1, got "1e400"'],
    [{ temperature_increment: "-0.1" }, "invalid_temperature_increment", 'temperature_increment: expected a number from 0 to 1, got "-0.1"'],
    [{ compression_ratio_threshold: "0.5" }, "invalid_compression_ratio_threshold", 'compression_ratio_threshold: expected a number from 1 to 10, got "0.5"'],
    [{ logprob_threshold: "1" }, "invalid_logprob_threshold", 'logprob_threshold: expected a number from -10 to 0, got "1"'],
    [{ no_speech_threshold: "NaN" }, "invalid_no_speech_threshold", 'no_speech_threshold: expected a number from 0 to 1, got "NaN"'],
    [{ vad_threshold: "1" }, "invalid_vad_threshold", 'vad_threshold: expected a number from 0.05 to 0.95, got "1"'],
    [{ min_silence_ms: "99999" }, "invalid_min_silence_ms", 'min_silence_ms: expected a number from 0 to 10000, got "99999"'],
    [{ prompt: "x".repeat(MAX_PROMPT_CHARS + 1) }, "invalid_prompt", `prompt: at most ${MAX_PROMPT_CHARS} characters together (whisper keeps 224 tokens of it), got ${MAX_PROMPT_CHARS + 1}`],
    [{ prompt: "x".repeat(600), hotwords: "y".repeat(600) }, "invalid_prompt", `hotwords, prompt: at most ${MAX_PROMPT_CHARS} characters together (whisper keeps 224 tokens of it), got 1201`],
    [{ prompt: "a\u0000b" }, "invalid_prompt", "prompt: control characters are not allowed"],
  ])("refuses %j with %s", (fields, code, message) => {
    expect(() => parseJobFields(fields)).toThrow(expect.objectContaining({ status: 400, code, message }));
  });
});

/** The error-code registry: every code a class produces is in it, consistent with the class; the wire's lists drawn from it; docs/api.md names them. */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as errors from "./errors.js";
import { ERROR_CODES, isErrorCode, type ErrorCode, type ErrorCodeInfo } from "./error-codes.js";
import { AUDIO_CLIENT_FAULTS, AUDIO_RETRYABLE, CHAT_CLIENT_FAULTS, WIRE } from "./wire-codes.js";

const ROOTS = ["agent", "scheduler", "core", "speech", "config", "cli", "models", "hub"];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : sources(path);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts") ? [path] : [];
  });
}

const FILES = ROOTS.flatMap(sources).map((path) => ({ path, text: readFileSync(path, "utf8") }));
const WIRE_NAMES: Record<string, string> = WIRE;

/** `"code"` or `WIRE.name` as a call's first argument, as a code; undefined when it is computed. */
function literal(arg: string): string | undefined {
  const quoted = /^"([a-z_]+)"$/.exec(arg);
  if (quoted) return quoted[1];
  const wire = /^WIRE\.(\w+)$/.exec(arg);
  return wire ? WIRE_NAMES[wire[1]!] : undefined;
}

/** Every `new <Class>(<code>, …` in the sources whose code is written out: [class, code, where]. */
function constructed(classes: readonly string[]): [string, string, string][] {
  const found: [string, string, string][] = [];
  const call = new RegExp(`new (${classes.join("|")})\\(\\s*("[a-z_]+"|WIRE\\.\\w+)`, "g");
  for (const { path, text } of FILES) {
    for (const m of text.matchAll(call)) found.push([m[1]!, literal(m[2]!)!, path]);
  }
  return found;
}

const info = (code: string): ErrorCodeInfo | undefined => (isErrorCode(code) ? ERROR_CODES[code] : undefined);
const answers = (i: ErrorCodeInfo) => [[i.status, i.type], ...(i.also ?? []).map((a) => [a.status, a.type])];

describe("the error-code registry", () => {
  it("every code an HTTP error class is built with is registered under that class's status and type", () => {
    // each class's status and type, from an instance of it
    const classes = {
      InvalidRequestError: new errors.InvalidRequestError("invalid_json", "x"),
      AuthenticationError: new errors.AuthenticationError("invalid_api_key", "x"),
      PermissionError: new errors.PermissionError("tier_too_low", "x"),
      NotFoundError: new errors.NotFoundError("job_not_found", "x"),
      ConflictError: new errors.ConflictError("job_finished", "x"),
      PayloadTooLargeError: new errors.PayloadTooLargeError("file_too_large", "x"),
      TooManyRequestsError: new errors.TooManyRequestsError("too_many_watchers", "x"),
      ServiceUnavailableError: new errors.ServiceUnavailableError("queue_full", "x"),
      UpstreamError: new errors.UpstreamError("agent_lost", "x"),
    };
    const built = constructed(Object.keys(classes));
    expect(built.length).toBeGreaterThan(150);
    for (const [cls, code, where] of built) {
      const registered = info(code);
      expect(registered, `${code} (${cls}, ${where}) is not registered`).toBeDefined();
      const { status, type } = classes[cls as keyof typeof classes];
      expect(answers(registered!), `${code} (${cls}, ${where})`).toContainEqual([status, type]);
    }
    // the classes whose code is fixed or defaulted, and ApiError built with all three
    const fixed = [
      new errors.RateLimitError("x", 1),
      new errors.InFlightLimitError("x"),
      new errors.InsufficientStorageError("x"),
      ...["token_quota_exceeded", "audio_quota_exceeded"].map((c) => new errors.RateLimitError("x", 1, c as ErrorCode)),
    ];
    for (const e of fixed) expect(answers(info(e.code)!), e.code).toContainEqual([e.status, e.type]);
    // a request schema's own codes (core/schema.ts: refusal, issueCode) become InvalidRequestErrors
    let refusals = 0;
    for (const { path, text } of FILES) {
      for (const m of text.matchAll(/(?:refusal|issueCode)\(\s*"([a-z_]+)"/g)) {
        refusals++;
        expect(answers(info(m[1]!)!), `${m[1]} (${path})`).toContainEqual([400, "invalid_request_error"]);
      }
    }
    expect(refusals).toBeGreaterThan(10);
    for (const { path, text } of FILES) {
      for (const m of text.matchAll(/(?:new ApiError|super)\((\d{3}), "(\w+)", "([a-z_]+)"/g)) {
        expect(answers(info(m[3]!)!), `${m[3]} (${path})`).toContainEqual([Number(m[1]), m[2]]);
      }
    }
  });

  it("every engine code is registered: the chat engine's as chat codes, the transcription engine's as audio codes", () => {
    const engines: [string, string][] = [
      ["agent/llm/errors.ts", "chat"],
      ["agent/llm/engine.ts", "chat"],
      ["agent/asr/errors.ts", "audio"],
    ];
    for (const [path, kind] of engines) {
      const text = readFileSync(path, "utf8");
      const codes = [...text.matchAll(/(?:super|new LlmEngineError)\(\s*("[a-z_]+"|WIRE\.\w+)/g)].map((m) => literal(m[1]!)!);
      expect(codes.length, path).toBeGreaterThan(2);
      for (const code of codes) {
        expect(info(code), `${code} (${path})`).toBeDefined();
        expect(info(code)!.engine, `${code} (${path})`).toContain(kind);
      }
    }
    for (const code of Object.values(WIRE)) expect(info(code), code).toBeDefined();
  });

  it("each entry is consistent: a client's fault is a 4xx, a 4xx that is not is worth trying elsewhere, a status has its type", () => {
    const typeOf: Record<number, string> = {
      400: "invalid_request_error",
      401: "authentication_error",
      403: "permission_error",
      404: "not_found_error",
      409: "invalid_request_error",
      413: "invalid_request_error",
      429: "rate_limit_error",
      500: "server_error",
      502: "upstream_error",
      503: "service_unavailable_error",
      507: "service_unavailable_error",
    };
    for (const [code, i] of Object.entries(ERROR_CODES) as [string, ErrorCodeInfo][]) {
      expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(i.description.length, code).toBeGreaterThan(5);
      if (i.status === null) expect(i.type, code).toBeNull();
      else expect(i.type, code).toBe(typeOf[i.status]);
      if (i.client) expect(i.status! >= 400 && i.status! < 500, code).toBe(true);
      if (i.status !== null && i.status < 500 && !i.client) expect(i.retryable, code).toBe(true);
    }
  });

  it("draws the wire's lists as they were written out by hand", () => {
    // core/wire-codes.ts's lists before they were drawn from the registry
    expect([...CHAT_CLIENT_FAULTS].sort()).toEqual(
      ["context_length_exceeded", "invalid_logit_bias", "invalid_response_format", "invalid_dimensions", "invalid_n", "invalid_input", "invalid_tools"].sort(),
    );
    expect([...AUDIO_CLIENT_FAULTS].sort()).toEqual(
      [
        "invalid_audio",
        "invalid_model",
        "invalid_language",
        "conflicting_language",
        "translate_disabled",
        "invalid_boolean",
        "invalid_integer",
        "invalid_speakers",
        "invalid_prompt",
        "invalid_temperature",
        "invalid_temperature_increment",
        "invalid_entropy_threshold",
        "invalid_logprob_threshold",
        "invalid_no_speech_threshold",
        "invalid_vad_threshold",
        "invalid_min_silence_ms",
      ].sort(),
    );
    expect([...AUDIO_RETRYABLE].sort()).toEqual(
      ["queue_full", "draining", "model_not_installed", "diarization_unavailable", "translation_unavailable", "file_too_large", "engine_unavailable"].sort(),
    );
  });

  it("docs/api.md names every code a client can be answered with, in backticks", () => {
    const doc = readFileSync("docs/api.md", "utf8");
    const missing = (Object.keys(ERROR_CODES) as ErrorCode[]).filter((code) => ERROR_CODES[code].status !== null && !doc.includes(`\`${code}\``));
    expect(missing).toEqual([]);
  });
});

/**
 * Kiln's errors. One base, `KilnError`: a stable `code` a program branches on and a message for
 * people. Under it, one family per area: `ApiError` (an HTTP answer: status, `type`, `code`; every
 * public error body is `{"error": {"message", "type", "code"}}`, docs/api.md#errors; these classes
 * are the one place where a status, a `type` and a `code` meet), `ConfigError` (a flag or file
 * at fault), and the engines' own (`agent/llm/errors.ts`, `agent/asr/errors.ts`) and MCP's.
 * An HTTP answer's and an engine's `code` is an `ErrorCode`: one of core/error-codes.ts's, which says its
 * status and type (a code not there does not compile).
 */
import type { ErrorCode } from "./error-codes.js";

/** The base of every error Kiln names: its message is for the operator or the client, never a stack. */
export class KilnError<Code extends string = string> extends Error {
  constructor(
    readonly code: Code,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The `type` values of the error contract. */
export const ERROR_TYPES = [
  "invalid_request_error",
  "authentication_error",
  "permission_error",
  "not_found_error",
  "rate_limit_error",
  "service_unavailable_error",
  "upstream_error",
  "server_error",
] as const;
export type ErrorType = (typeof ERROR_TYPES)[number];

export interface ErrorBody {
  /** `param`: the request field at fault (OpenAI's ErrorObject requires the member): the field's path on invalid-request errors, null on the others. */
  error: { message: string; type: ErrorType; code: ErrorCode; param?: string | null };
}

/** An error with its HTTP meaning: the status, the contract's `type` and `code`, and extra headers. */
export class ApiError extends KilnError<ErrorCode> {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    code: ErrorCode,
    message: string,
    /** Extra response headers (e.g. `Retry-After`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(code, message);
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, code: this.code, param: null } };
  }
}

/** A field path at the start of a message: `messages[0].content:`, `config.authentication.token_env:`. */
const FIELD_PREFIX = /^([A-Za-z_][\w-]*(?:\[\d+\]|\.[\w-]+)*):/;

/** 400: malformed JSON, a missing or invalid field, an unknown model. `message` names the field. */
export class InvalidRequestError extends ApiError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(400, "invalid_request_error", code, message);
  }

  /** `param`: the field given, else the path the message starts with (the contract: "field: what is wrong"), else null. */
  override toBody(): ErrorBody {
    return { error: { ...super.toBody().error, param: this.field ?? FIELD_PREFIX.exec(this.message)?.[1] ?? null } };
  }
}

/** 401: a missing, malformed, expired, revoked or wrongly signed key. */
export class AuthenticationError extends ApiError {
  constructor(code: ErrorCode, message: string) {
    super(401, "authentication_error", code, message, { "WWW-Authenticate": 'Bearer realm="kiln"' });
  }
}

/** 403: a feature above the key's tier. */
export class PermissionError extends ApiError {
  constructor(code: ErrorCode, message: string) {
    super(403, "permission_error", code, message);
  }
}

/** 404: an unknown job id, MCP server id or route. */
export class NotFoundError extends ApiError {
  constructor(code: ErrorCode, message: string) {
    super(404, "not_found_error", code, message);
  }
}

/** 409: the request conflicts with the resource's state (a job not finished yet, or already finished). */
export class ConflictError extends ApiError {
  constructor(code: ErrorCode, message: string) {
    super(409, "invalid_request_error", code, message);
  }
}

/** 413: a body or upload over its limit. */
export class PayloadTooLargeError extends ApiError {
  constructor(code: ErrorCode, message: string) {
    super(413, "invalid_request_error", code, message);
  }
}

/** 429: the account's requests-per-minute limit is spent; `retryAfterSeconds` goes into `Retry-After`. */
export class RateLimitError extends ApiError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
    code: ErrorCode = "rate_limit_exceeded",
  ) {
    super(429, "rate_limit_error", code, message, { "Retry-After": String(retryAfterSeconds) });
  }
}

/** 429: a client holds its share of something counted per client already (e.g. a job's open event streams). */
export class TooManyRequestsError extends ApiError {
  constructor(code: ErrorCode, message: string) {
    super(429, "rate_limit_error", code, message);
  }
}

/** 429: the account already has its tier's cap of chat completions in flight (queued or generating). */
export class InFlightLimitError extends ApiError {
  constructor(message: string) {
    super(429, "rate_limit_error", "too_many_requests_in_flight", message);
  }
}

/** 503: no agent can serve the request now (none serves the model, or the queue is full or timed out). */
export class ServiceUnavailableError extends ApiError {
  constructor(code: ErrorCode, message: string) {
    super(503, "service_unavailable_error", code, message);
  }
}

/** 507: the upload does not fit the instance's staging budget or its free disk. */
export class InsufficientStorageError extends ApiError {
  constructor(message: string) {
    super(507, "service_unavailable_error", "insufficient_storage", message);
  }
}

/** 502: the agent running the request failed or went away after it had started answering. */
export class UpstreamError extends ApiError {
  constructor(code: ErrorCode, message: string) {
    super(502, "upstream_error", code, message);
  }
}

/** A configuration value that fails validation; `key` names it as the user wrote it (flag or env). */
export class ConfigError extends KilnError<ErrorCode> {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super("invalid_config", `${key}: ${message}`);
  }
}

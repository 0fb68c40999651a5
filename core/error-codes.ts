/**
 * Every error code Kiln names, once: the HTTP status and error `type` a client sees it under, whether
 * the client caused it, whether it is worth trying again (elsewhere or later), and what it means.
 * `ErrorCode` (the keys) is the `code` parameter of the error classes (core/errors.ts, the engines'),
 * so a code written out that is not here does not compile. Two doors let other codes through, on
 * purpose: `fieldCode` (the request schema's `invalid_<field>`, one per field, documented as a family)
 * and `relayedCode` (a code another process sent). The fleet link's lists (core/wire-codes.ts) are
 * drawn from the `engine` and `client`/`retryable` columns. docs/api.md#errors names every code with a
 * status (core/error-codes.test.ts checks it).
 *
 * `status: null`: the code is never an HTTP answer (an agent that cannot start, say).
 * `engine`: an agent's engine code for that kind of request, which the scheduler reads off the link:
 * a client fault there is a 400 naming the field (before any output), a retryable one goes to another
 * node, anything else is a 502 `upstream_error` carrying the code.
 * `also`: another status the same code is answered with, and when.
 */
import type { ErrorType } from "./errors.js";

export type EngineKind = "chat" | "audio";

export interface ErrorCodeInfo {
  readonly status: number | null;
  readonly type: ErrorType | null;
  /** The request (or its sender) is at fault: the same request fails on any node. */
  readonly client: boolean;
  /** Trying again can succeed: on another node, or later. */
  readonly retryable: boolean;
  readonly description: string;
  readonly engine?: readonly EngineKind[];
  readonly also?: readonly { readonly status: number; readonly type: ErrorType; readonly when: string }[];
}

// Shorthands for the table below; each says status and type, the rest is written out per code.
const bad = (description: string, more: Partial<ErrorCodeInfo> = {}) =>
  ({ status: 400, type: "invalid_request_error", client: true, retryable: false, description, ...more }) as const;
const unauthenticated = (description: string) => ({ status: 401, type: "authentication_error", client: true, retryable: false, description }) as const;
const forbidden = (description: string) => ({ status: 403, type: "permission_error", client: true, retryable: false, description }) as const;
const notFound = (description: string) => ({ status: 404, type: "not_found_error", client: true, retryable: false, description }) as const;
const conflict = (description: string) => ({ status: 409, type: "invalid_request_error", client: true, retryable: false, description }) as const;
const tooLarge = (description: string, more: Partial<ErrorCodeInfo> = {}) =>
  ({ status: 413, type: "invalid_request_error", client: true, retryable: false, description, ...more }) as const;
const limited = (description: string) => ({ status: 429, type: "rate_limit_error", client: true, retryable: true, description }) as const;
const unavailable = (description: string, more: Partial<ErrorCodeInfo> = {}) =>
  ({ status: 503, type: "service_unavailable_error", client: false, retryable: true, description, ...more }) as const;
const upstream = (description: string, more: Partial<ErrorCodeInfo> = {}) =>
  ({ status: 502, type: "upstream_error", client: false, retryable: false, description, ...more }) as const;
const internal = (description: string) => ({ status: 500, type: "server_error", client: false, retryable: false, description }) as const;
const notAnswered = (description: string, more: Partial<ErrorCodeInfo> = {}) => ({ status: null, type: null, client: false, retryable: false, description, ...more }) as const;

const CHAT = ["chat"] as const;
const AUDIO = ["audio"] as const;
const BOTH = ["chat", "audio"] as const;
/** A field of a transcription's form that is out of range: the agent checks it again (speech/fields.ts). */
const audioField = (field: string) => bad(`\`${field}\` is not a value whisper takes`, { engine: AUDIO });
/** A node that lacks what the request needs: a 400 on that node, but another node may have it. */
const nodeLacks = (description: string) => bad(description, { client: false, retryable: true, engine: AUDIO });

export const ERROR_CODES = {
  // 400: the request's body or fields
  invalid_json: bad("the body is not JSON"),
  incomplete_body: bad("the body ended before its Content-Length"),
  invalid_content_type: bad("the body's Content-Type is not one the route reads"),
  missing_required_field: bad("a required field is absent or null"),
  invalid_type: bad("a field has the wrong JSON type"),
  invalid_value: bad("a field's value is not one of those allowed"),
  invalid_role: bad("a message's role is not system, user, assistant or tool"),
  invalid_messages: bad("`messages` cannot be read (a tool call's arguments that are not JSON, nesting too deep)"),
  invalid_temperature: bad("`temperature` is out of range", { engine: AUDIO }),
  invalid_max_tokens: bad("`max_tokens` is out of range"),
  invalid_stop: bad("`stop` is not a string or a list of up to four"),
  invalid_logprobs: bad("`logprobs` cannot be given as asked"),
  invalid_top_logprobs: bad("`top_logprobs` without `logprobs: true`, or out of range"),
  invalid_tool_choice: bad("`tool_choice` names no tool given, or needs tools"),
  invalid_rpm: bad("`rpm` is absent or out of range for the tier"),
  invalid_account: bad("the account name is not one Kiln accepts"),
  invalid_limit: bad("`limit` is not a whole number in range"),
  invalid_start_date: bad("`start_date` is not a YYYY-MM-DD day, or is after `end_date`"),
  invalid_end_date: bad("`end_date` is not a YYYY-MM-DD day"),
  invalid_segments_after: bad("`segments_after` is not a whole number"),
  invalid_timestamp_granularities: bad("`timestamp_granularities` names one Kiln does not produce"),
  model_not_found: bad("`model` is not a model of this service", {
    also: [{ status: 404, type: "not_found_error", when: "GET /v1/models/{model} names one" }],
  }),
  unsupported_parameter: bad("a parameter Kiln does not support"),
  unsupported_content: bad("a content part of a type other than text"),
  // 400: the chat engine's client faults (the agent checks again; the scheduler relays them as 400s)
  context_length_exceeded: bad("the prompt does not fit the model's context", { engine: CHAT }),
  invalid_logit_bias: bad("`logit_bias` names a token outside the vocabulary, or too many", { engine: CHAT }),
  invalid_response_format: bad("`response_format` (the Responses API's `text.format`) cannot be turned into a grammar", { engine: CHAT }),
  invalid_dimensions: bad("`dimensions` is not the size the model's embeddings have", { engine: CHAT }),
  invalid_n: bad("`n` asks for more choices than the model runs at once", { engine: CHAT }),
  invalid_input: bad(
    "the embeddings' `input` is too much for one request, or a Responses `input` breaks the rule of function calls (an output answering no call, a call unanswered)",
    {
      engine: CHAT,
    },
  ),
  invalid_tools: bad("`tools` cannot be offered as given", { engine: CHAT }),
  // 400: a transcription's form and file
  missing_audio: bad("no audio file in the form"),
  too_many_files: bad("more files than one request may carry"),
  too_many_fields: bad("more form fields than one request may carry"),
  duplicate_field: bad("a form field sent twice"),
  field_too_large: bad("a form field longer than its limit"),
  invalid_multipart: bad("the multipart body cannot be read"),
  upload_aborted: bad("the upload stopped before its end"),
  invalid_format: bad("`response_format` is not one the transcription writes"),
  invalid_audio: bad("the file is empty, not media, has no audio track, or runs too long", { engine: AUDIO }),
  invalid_model: audioField("model"),
  invalid_language: audioField("language"),
  conflicting_language: bad("`language` and `source_language` disagree", { engine: AUDIO }),
  translate_disabled: bad("`translate` is false but a target language asks for a translation", { engine: AUDIO }),
  invalid_boolean: bad("a true/false field holds something else", { engine: AUDIO }),
  invalid_integer: bad("a whole-number field holds something else", { engine: AUDIO }),
  invalid_speakers: bad("`min_speakers`/`max_speakers` out of range or in the wrong order", { engine: AUDIO }),
  invalid_prompt: bad("`prompt` and `hotwords` are too long or hold control characters", { engine: AUDIO }),
  invalid_temperature_increment: audioField("temperature_increment"),
  invalid_entropy_threshold: audioField("entropy_threshold"),
  invalid_logprob_threshold: audioField("logprob_threshold"),
  invalid_no_speech_threshold: audioField("no_speech_threshold"),
  invalid_vad_threshold: audioField("vad_threshold"),
  invalid_min_silence_ms: audioField("min_silence_ms"),
  model_not_installed: nodeLacks("the whisper model is not installed on a node that will not download it"),
  diarization_unavailable: nodeLacks("speaker diarization asked of a node without its models"),
  translation_unavailable: nodeLacks("a translation beyond English asked of a node without a chat model"),
  // 400: MCP servers and secrets
  invalid_config: bad("an MCP server's configuration fails validation"),
  inlined_secret: bad("a secret written into an MCP configuration instead of named"),
  unknown_secret: bad("an MCP configuration names a secret the account does not have"),
  unknown_stdio_server: bad("a stdio MCP server that is not in the operator's list"),
  invalid_server_type: bad("an MCP server type Kiln does not know"),
  mcp_filesystem_disabled: bad("a filesystem MCP server on a scheduler that offers none"),
  config_too_large: bad("an MCP configuration over its size limit"),
  mcp_server_limit: bad("the account has its most MCP servers already"),
  invalid_secret_name: bad("a secret's name is not an environment variable's"),
  secret_too_large: bad("a secret's value over its size limit"),
  secret_limit: bad("the account has its most secrets already"),
  // 400: the dashboard
  invalid_catalog: bad("the operator's model catalog fails its checks (an entry's field, a name given twice)"),
  // 401
  missing_api_key: unauthenticated("no `Authorization: Bearer` header"),
  invalid_auth_scheme: unauthenticated("an Authorization header that is not Bearer"),
  invalid_api_key: unauthenticated("a key (or token) that is not one"),
  expired_api_key: unauthenticated("a key past its expiry"),
  revoked_api_key: unauthenticated("a key that was revoked"),
  missing_job_handle: unauthenticated("a job read without its handle or the agent token"),
  invalid_job_handle: unauthenticated("a handle that is not the job's"),
  invalid_admin_token: unauthenticated("the dashboard's admin token is missing or wrong"),
  // 403
  tier_too_low: forbidden("a feature above the key's tier"),
  mcp_egress_denied: forbidden("an MCP connection to an address that is not public"),
  token_required: forbidden("a route that needs the agent token on an instance without one"),
  host_not_allowed: forbidden("a non-loopback Host on an instance without an agent token"),
  // 404
  route_not_found: notFound("no such route"),
  job_not_found: notFound("no such job"),
  key_not_found: notFound("no such key"),
  mcp_server_not_found: notFound("no such MCP server"),
  secret_not_found: notFound("no such secret"),
  response_not_found: notFound("no stored response: the Responses API's responses are not stored (`store: true` is refused)"),
  dashboard_disabled: notFound("the dashboard is turned off"),
  node_not_found: notFound("no node with that id is connected to this scheduler (the dashboard's fleet actions)"),
  replica_not_found: notFound("the node holds no replica of the model (to unpin: no pin of it)"),
  // 409
  job_not_completed: conflict("the job's result asked for before it completed"),
  job_failed: conflict("the job's result asked for after it failed"),
  job_cancelled: conflict("the job's result asked for after it was cancelled"),
  job_finished: conflict("an ended job cancelled"),
  upload_before_request: conflict("a file sent before the request it belongs to"),
  placement_refused: conflict(
    "a replica pinned to a node that cannot take it now: it takes no placed replicas, is draining, lacks the room even once its idle unpinned replicas are unloaded, or the model has its max_replicas",
  ),
  replica_busy: conflict("a replica unloaded while it answers requests (without `force`), or pinned while it is being unloaded"),
  // 413
  request_too_large: tooLarge("a body over its limit"),
  file_too_large: tooLarge("an upload over its limit (another node's limit may be higher)", { client: false, retryable: true, engine: AUDIO }),
  // 429
  rate_limit_exceeded: limited("the account's requests per minute are spent (`Retry-After`)"),
  token_quota_exceeded: limited("the account's token quota is spent (`Retry-After`)"),
  audio_quota_exceeded: limited("the account's audio seconds are spent (`Retry-After`)"),
  too_many_requests_in_flight: limited("the account (or address) has its most requests in flight"),
  too_many_watchers: limited("a job has its most event streams open"),
  // 503
  model_unavailable: unavailable("no node serves the model now"),
  model_too_large: unavailable("no node of the fleet could hold the model (its memory for the catalog's context and sequences)"),
  queue_full: unavailable("the queue is full", { engine: AUDIO }),
  queue_timeout: unavailable("the request waited in the queue too long"),
  mcp_busy: unavailable("the scheduler runs its most MCP tests already"),
  shutting_down: unavailable("the scheduler is shutting down"),
  uploads_busy: unavailable("the scheduler holds its most uploads already"),
  upload_failed: unavailable("the upload could not be stored", {
    also: [{ status: 502, type: "upstream_error", when: "the scheduler could not forward it to the node" }],
  }),
  limits_unavailable: unavailable("the rate-limit store (Redis) cannot be reached"),
  draining: unavailable("the node is draining: another node may take the request", { engine: BOTH }),
  engine_unavailable: unavailable("the node cannot transcribe now (no ffmpeg, VAD model or whisper model)", { engine: AUDIO }),
  // 507
  insufficient_storage: {
    status: 507,
    type: "service_unavailable_error",
    client: false,
    retryable: true,
    description: "the upload does not fit the staging budget or the free disk",
  },
  // 502: the node or an MCP server
  agent_error: upstream("the node ended a request without its answer, or answered what the scheduler cannot read"),
  agent_lost: upstream("the node generating an answer went away after some of it was sent"),
  agents_failed: upstream("every node tried failed the request"),
  client_gone: upstream("the client went away before the request was sent on"),
  cancelled: upstream("the request was cancelled (its client went away, or the link went down)", { engine: BOTH }),
  node_busy: upstream("another scheduler's work took the node's slot: queue it or send it elsewhere", { retryable: true, engine: CHAT }),
  transcription_unavailable: upstream("the node takes no transcriptions", { retryable: true }),
  engine_error: upstream("the node's engine failed on input that looked valid", { engine: BOTH }),
  invalid_request: upstream("the node's chat engine refused a request the scheduler passed", { engine: CHAT }),
  model_not_served: upstream("the node does not serve the model asked for", { retryable: true, engine: CHAT }),
  job_aborted: upstream("the node stopped before the transcription finished", { engine: AUDIO }),
  transcription_failed: upstream("the node's transcription failed (its log has the request id)", { engine: AUDIO }),
  mcp_unreachable: upstream("the MCP server could not be reached"),
  mcp_timeout: upstream("the MCP server did not answer in time"),
  mcp_misconfigured: upstream("the MCP server refused the configuration given"),
  mcp_bad_answer: upstream("the MCP server's answer could not be read"),
  mcp_answer_too_large: upstream("the MCP server's answer was over its limit"),
  // 500
  internal_error: internal("a fault in Kiln; the request id is in x-request-id"),
  mcp_sandbox_failed: internal("the MCP test's sandbox could not run it"),
  // never an HTTP answer
  model_load_failed: notAnswered("a model file the agent cannot load: it does not start", { engine: CHAT }),
  model_already_loaded: notAnswered("a LoadModel for a model the agent serves already: the replica it has stays", { engine: CHAT }),
  backend_unavailable: notAnswered("the --gpu backend asked for cannot be loaded: the agent does not start", { engine: CHAT }),
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}

/**
 * A code that came from another process (an agent's link message, the MCP sandbox's answer), passed on
 * as it came: a newer agent's code this scheduler does not know is still the client's to see.
 */
export function relayedCode(code: string): ErrorCode {
  return code as ErrorCode;
}

/** `invalid_<field>` for a field the request schema refused: one code per field (docs/api.md: `invalid_<field>`). */
export function fieldCode(field: string): ErrorCode {
  return `invalid_${field}` as ErrorCode;
}

/** The codes drawn from the table by a test on their entries. */
export function codesWhere(test: (info: ErrorCodeInfo) => boolean): ReadonlySet<string> {
  return new Set((Object.keys(ERROR_CODES) as ErrorCode[]).filter((code) => test(ERROR_CODES[code])));
}

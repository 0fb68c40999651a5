/**
 * `POST /v1/audio/transcriptions` and `POST /v1/audio/translations`: OpenAI's multipart form, run
 * by the fleet's transcribing agents (`../../fleet/audio.ts`).
 *
 * The `file` part goes to a spool on the scheduler's disk as it arrives (never whole into memory),
 * its size limit enforced while it streams (413, the spool and the agent's partial copy removed), and
 * the disk's free space asked before it and every `SPOOL_CHECK_BYTES` of it (507 at `--spool-min-free`,
 * removed the same way).
 * When `model` came before the file, the request is routed at once and the upload streams on to
 * the agent as it arrives; otherwise it is routed when the form ends. The answer is rendered in
 * `response_format`, or streamed as `transcript.text.delta` / `.done` events.
 */
import { formatBytes } from "../../../core/bytes.js";
import { mkdir } from "node:fs/promises";
import { freeBytes } from "../../../core/disk.js";
import type { IncomingMessage } from "node:http";
import busboy from "busboy";
import { Hono, type Context } from "hono";
import { InsufficientStorageError, InvalidRequestError, ApiError, PayloadTooLargeError, ServiceUnavailableError, UpstreamError } from "../../../core/errors.js";
import { drain, setResponseHeader, setResponseHeaders, sseResponse } from "../../../core/http/index.js";
import type { Logger } from "../../../core/log.js";
import { CONTENT_TYPES, render } from "../../../speech/formats.js";
import { jsonBody, streamEvents, textBody, verboseBody } from "../../../speech/openai.js";
import type { Transcript } from "../../../speech/transcript.js";
import { parseAudioForm, type AudioForm, type AudioTask, type RawFields } from "../../audio/fields.js";
import { Spool } from "../../audio/spool.js";
import type { AudioEvent, AudioRequest, Fleet } from "../../fleet/index.js";
import type { UsageLedger, UsageOwner } from "../../usage/index.js";
import { InflightLimiter, type TokenQuota } from "../../ratelimit/index.js";
import type { AppEnv } from "../env.js";
import { IGNORED_FIELDS_HEADER, ignoredFieldsHeader, type GenerationDeps } from "./generate.js";

export interface AudioDeps {
  fleet: Fleet;
  usage: UsageLedger;
  /** Where uploads are held while they run. */
  spoolDir: string;
  /** Largest `file`, in bytes (the spec's 1 GB). */
  maxFileBytes: number;
  /** Uploads this scheduler holds at once, all accounts together (503 beyond). */
  maxUploads: number;
  /** Uploads one account may have in flight at once (429 beyond). */
  maxUploadsPerAccount: number;
  /** Free disk the spool leaves (`--spool-min-free`): asked before an upload and every `SPOOL_CHECK_BYTES` of it (507 below). Default 512 MiB. */
  minFreeBytes?: number;
  /** Free bytes on the spool's disk. Default: statfs (`core/disk.ts`); tests give a disk of their own. */
  freeBytes?: (dir: string) => Promise<number>;
  /** The account's audio-seconds quotas (429 `audio_quota_exceeded` once one is spent): counted from the seconds each transcription was charged. Default: none. */
  quota?: TokenQuota;
  cap: GenerationDeps["cap"];
  logger: Logger;
}

const FIELD_BYTES = 64 * 1024;
const MAX_FIELDS = 64;
/** How often a quiet event stream writes a comment. */
const STREAM_PING_MS = 15_000;
/** Disk the spool leaves free by default (the database shares it). */
export const SPOOL_FLOOR_BYTES = 512 * 1024 ** 2;
/** An upload asks the disk again after each of these many bytes it wrote (a chunked one declares none). */
export const SPOOL_CHECK_BYTES = 4 * 1024 ** 2;
/** Room for the form's framing and fields beside the file, in a declared Content-Length. */
const FORM_OVERHEAD = 1024 ** 2;

export function audioRoutes(deps: AudioDeps): Hono<AppEnv> {
  let uploads = 0;
  const accountUploads = new InflightLimiter();
  const uploadRefusal = (n: number) => `file: this account has its ${n} audio requests in flight already (--audio-uploads-per-account); wait for one to finish`;
  const route =
    (task: AudioTask) =>
    async (c: Context<AppEnv>): Promise<Response> => {
      const req = c.env.incoming;
      const { account, tier, keyId } = c.get("identity");
      let release: (() => void) | undefined;
      let releaseUpload: (() => void) | undefined;
      try {
        release = await deps.cap.inflight.acquire(account, deps.cap.maxInflight[tier]);
        if (deps.quota) setResponseHeaders(c, await deps.quota.check(account, tier));
        const declared = Number(c.req.header("content-length") ?? NaN);
        if (declared > deps.maxFileBytes + FORM_OVERHEAD)
          throw new PayloadTooLargeError("file_too_large", `file: the request's ${declared} bytes are more than the ${formatBytes(deps.maxFileBytes)} limit`);
        if (uploads >= deps.maxUploads) throw new ServiceUnavailableError("uploads_busy", `file: this scheduler holds ${deps.maxUploads} uploads already; retry shortly`);
        // the spool shares its disk with the database: a floor stays free, beside what this upload declares
        await mkdir(deps.spoolDir, { recursive: true, mode: 0o700 });
        const free = await (deps.freeBytes ?? freeBytes)(deps.spoolDir);
        if (free < (Number.isFinite(declared) ? declared : 0) + (deps.minFreeBytes ?? SPOOL_FLOOR_BYTES))
          throw new InsufficientStorageError("file: the scheduler's disk is too full to hold this upload; try again later");
        releaseUpload = accountUploads.acquire(account, deps.maxUploadsPerAccount, uploadRefusal);
      } catch (err) {
        release?.();
        await drain(req);
        throw err;
      }
      uploads++;
      const abort = new AbortController();
      c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
      let spool: Spool | undefined;
      /** Whether the SSE stream took over the cleanup (it runs when the stream ends). */
      let streaming = false;
      try {
        spool = await Spool.create(deps.spoolDir);
        const received = await receive(task, req, spool, deps, abort, c.get("requestId"));
        const { form } = received;
        // the audio seconds of a transcription that completes go to the account's usage
        const owner = { account, keyId, model: form.model, kind: "transcription" as const, requestId: c.get("requestId") };
        const events = meterAudio(received.events, deps.usage, owner);
        // set on Node's response, as a streamed answer's head is written before Hono would merge its own (core/http/event-stream.ts)
        if (form.ignored.length > 0) setResponseHeader(c, IGNORED_FIELDS_HEADER, ignoredFieldsHeader(form.ignored));
        if (form.stream) {
          streaming = true;
          return stream(c, events, abort, finish);
        }
        const transcript = await lastOf(events);
        return respond(c, form, transcript);
      } catch (err) {
        if (err instanceof ApiError && !req.readableEnded) {
          setResponseHeader(c, "Connection", "close"); // refused mid-upload: the rest is not read
          await drain(req);
        }
        throw err;
      } finally {
        if (!streaming) await finish();
      }

      async function finish(): Promise<void> {
        abort.abort();
        try {
          await spool?.remove();
        } catch (err) {
          deps.logger.error({ err, path: spool?.path }, "could not remove an audio upload's spool file");
        } finally {
          uploads--;
          releaseUpload?.();
          release?.();
        }
      }
    };
  return new Hono<AppEnv>().post("/transcriptions", route("transcriptions")).post("/translations", route("translations"));

  /** The SSE answer: a delta per finished segment, then the whole text; the request's cleanup runs when it ends. */
  function stream(c: Context<AppEnv>, events: AsyncIterable<AudioEvent>, abort: AbortController, done: () => Promise<void>): Response {
    const data = (body: unknown, event?: string): string => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(body)}\n\n`;
    return sseResponse(
      c,
      async (send) => {
        // a comment now and then while the agent works: proxies close connections that stay quiet
        const ping = setInterval(() => send(": ping\n\n"), STREAM_PING_MS);
        let first = true;
        try {
          for await (const event of events) {
            if (event.type === "segments") {
              for (const s of event.segments) {
                const text = s.text.trim();
                if (!text) continue;
                send(data(streamEvents.delta(first ? text : ` ${text}`)));
                first = false;
              }
            } else {
              send(data(streamEvents.done(event.transcript)));
            }
          }
        } catch (err) {
          const e = err instanceof ApiError ? err : new UpstreamError("agent_error", "the transcription failed");
          send(data(e.toBody(), "error"));
        } finally {
          clearInterval(ping);
          await done();
        }
      },
      () => abort.abort(),
    );
  }
}

/**
 * Reads the form: fields, and the one `file` part into `spool`. Routes the request as soon as the
 * model is known at the file's start, else when the form ends; resolves once the form is read,
 * with the transcription's events under way.
 */
function receive(
  task: AudioTask,
  req: IncomingMessage,
  spool: Spool,
  deps: AudioDeps,
  abort: AbortController,
  traceId: string,
): Promise<{ form: AudioForm; events: AsyncIterable<AudioEvent> }> {
  const contentType = req.headers["content-type"] ?? "";
  if (!/^multipart\/form-data/i.test(contentType)) {
    return Promise.reject(new InvalidRequestError("invalid_content_type", `Content-Type: expected multipart/form-data with a file, got "${contentType.slice(0, 100) || "none"}"`));
  }
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: req.headers, limits: { fileSize: deps.maxFileBytes, files: 1, fieldSize: FIELD_BYTES, fields: MAX_FIELDS } });
  } catch (err) {
    return Promise.reject(new InvalidRequestError("invalid_multipart", `Content-Type: ${err instanceof Error ? err.message : "malformed multipart header"}`));
  }
  const raw: RawFields = Object.create(null) as RawFields; // field names are the tenant's: "constructor" is a field here
  let request: AudioRequest | undefined;
  let events: AsyncIterable<AudioEvent> | undefined;
  let fileSeen = false;
  let fileName = "audio";
  let writing = Promise.resolve();
  let checkedAt = 0; // the spool's size when the disk was last asked
  /** Appends a chunk; past every SPOOL_CHECK_BYTES, asks the disk, and stops the upload at the floor (507). */
  const store = async (chunk: Buffer): Promise<void> => {
    await spool.append(chunk);
    if (spool.size - checkedAt < SPOOL_CHECK_BYTES) return;
    checkedAt = spool.size;
    if ((await (deps.freeBytes ?? freeBytes)(deps.spoolDir)) < (deps.minFreeBytes ?? SPOOL_FLOOR_BYTES))
      throw new InsufficientStorageError("file: the scheduler's disk ran too full while this upload arrived; try again later");
  };

  return new Promise((resolve, reject) => {
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      const code = (err as NodeJS.ErrnoException).code;
      const e =
        err instanceof ApiError
          ? err
          : code === "ENOSPC"
            ? new InsufficientStorageError("file: the scheduler's disk is full; try again later")
            : new ServiceUnavailableError("upload_failed", `file: the upload could not be stored (${code ?? "write failed"}); try again later`);
      req.unpipe(parser);
      spool.fail(e);
      abort.abort(); // the agent's copy, if the request was routed, is cancelled
      reject(e);
    };
    const route = (form: AudioForm, name: string) => {
      request = { model: form.model, options: form.options, fields: form.fields, needs: form.needs, fileName: name, spool, streamed: form.stream };
      events = deps.fleet.transcribe(request, abort.signal, traceId);
    };
    parser.on("field", (name, value, info) => {
      if (info.valueTruncated) return fail(new InvalidRequestError("field_too_large", `${name.slice(0, 64)}: longer than ${FIELD_BYTES} bytes`));
      (raw[name] ??= []).push(value);
    });
    parser.on("file", (name, file, info) => {
      file.on("error", () => undefined); // the parser's own error fails the upload
      if (name !== "file" || fileSeen || failed) {
        file.resume();
        if (name === "file" && !failed) fail(new InvalidRequestError("too_many_files", "file: one file per request"));
        return;
      }
      fileSeen = true;
      fileName = (info.filename || "audio").slice(0, 255);
      try {
        const early = parseAudioForm(task, raw, true); // fields before the file: a bad one is refused before the upload
        if (early.model) route(early, fileName);
      } catch (err) {
        file.resume();
        return fail(err);
      }
      file.on("limit", () => fail(new PayloadTooLargeError("file_too_large", `file: "${fileName.slice(0, 200)}" is larger than the ${formatBytes(deps.maxFileBytes)} limit`)));
      file.on("data", (chunk: Buffer) => {
        file.pause(); // one chunk at a time onto the disk: the client waits, not our memory
        writing = writing
          .then(() => (failed ? undefined : store(chunk)))
          .then(
            () => void file.resume(),
            (err: unknown) => {
              fail(err);
              file.resume();
            },
          );
      });
    });
    parser.on("filesLimit", () => fail(new InvalidRequestError("too_many_files", "file: one file per request")));
    parser.on("fieldsLimit", () => fail(new InvalidRequestError("too_many_fields", `at most ${MAX_FIELDS} form fields per request`)));
    parser.on("error", (err: Error) => fail(new InvalidRequestError("invalid_multipart", `body: malformed multipart data (${err.message})`)));
    req.on("aborted", () => fail(new InvalidRequestError("upload_aborted", "file: the upload was interrupted")));
    parser.on("close", () => {
      void writing.then(() => {
        if (failed) return;
        if (!fileSeen) return fail(new InvalidRequestError("missing_required_field", 'file: required (a file part named "file")'));
        try {
          const form = parseAudioForm(task, raw);
          if (request) {
            if (request.model !== form.model) throw new InvalidRequestError("duplicate_field", "model: given again after the file with another value");
            // the fields after the file complete them before the last chunk goes
            request.options = form.options;
            request.fields = form.fields;
            request.needs = form.needs;
            request.streamed = form.stream;
          }
          if (!request && abort.signal.aborted) throw new UpstreamError("client_gone", "the client went away");
          if (!deps.fleet.transcribes(form.model, form.needs)) {
            throw new ServiceUnavailableError(
              "model_unavailable",
              `model: no connected agent transcribes with "${form.model}"${form.needs.length ? ` with ${form.needs.join(" and ")}` : ""} right now`,
            );
          }
          spool.end();
          if (!request) route(form, fileName);
          resolve({ form, events: events! });
        } catch (err) {
          fail(err);
        }
      });
    });
    // busboy calls its listeners inside the request's data handler: a throw there would end the process
    for (const event of ["field", "file", "close"] as const) {
      const [listener] = parser.listeners(event) as ((...args: unknown[]) => void)[];
      parser.removeAllListeners(event);
      parser.on(event, (...args: unknown[]) => {
        try {
          listener!(...args);
        } catch (err) {
          fail(err);
        }
      });
    }
    req.pipe(parser);
  });
}

/** Passes a transcription's events on, recording its audio seconds once it is done. */
async function* meterAudio(events: AsyncIterable<AudioEvent>, ledger: UsageLedger, owner: UsageOwner): AsyncGenerator<AudioEvent> {
  for await (const e of events) {
    if (e.type === "done") ledger.record({ ...owner, promptTokens: 0, completionTokens: 0, audioSeconds: e.transcript.duration });
    yield e;
  }
}

/** The transcript a transcription's events end with. */
async function lastOf(events: AsyncIterable<AudioEvent>): Promise<Transcript> {
  for await (const event of events) if (event.type === "done") return event.transcript;
  throw new UpstreamError("agent_error", "the node ended the transcription without its result");
}

function respond(c: Context<AppEnv>, form: AudioForm, t: Transcript): Response {
  switch (form.responseFormat) {
    case "json":
      return c.json(jsonBody(t));
    case "verbose_json":
      return c.json(verboseBody(t, form.words, form.options.decoding?.temperature ?? 0));
    case "text":
      return c.text(textBody(t));
    case "srt":
    case "vtt":
      return c.body(render(t, form.responseFormat), 200, { "Content-Type": CONTENT_TYPES[form.responseFormat] });
  }
}

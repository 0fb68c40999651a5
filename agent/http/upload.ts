/**
 * Streaming `multipart/form-data` (busboy): every `audio` part goes to disk as it arrives, never
 * whole into memory. Limits are enforced while streaming: a file passing the size limit stops the
 * upload at once with a 413 and its partial file is removed; an 11th `audio` part is a 400; bytes
 * past the staging budget (charged chunk by chunk) stop it with the budget's error (507).
 * Text fields are collected (small, bounded); other file parts are drained and ignored.
 */
import { formatBytes } from "../../core/bytes.js";
import { createWriteStream, type WriteStream } from "node:fs";
import type { IncomingMessage } from "node:http";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import busboy from "busboy";
import { drain } from "../../core/http/index.js";
import { InsufficientStorageError, InvalidRequestError, ApiError, PayloadTooLargeError, ServiceUnavailableError } from "../../core/errors.js";
import type { StagedUpload } from "../jobs/index.js";

export interface UploadLimits {
  /** Largest file, in bytes (the spec's 1 GB). */
  fileBytes: number;
  /** Most `audio` parts in one request (the spec's 10). */
  files: number;
}

export interface ParsedUpload {
  files: StagedUpload[];
  fields: Record<string, string>;
}

const FIELD_BYTES = 64 * 1024;
const MAX_FIELDS = 64;

/** Where uploads go, and what they may take. */
export interface UploadStaging {
  /** Where an audio part goes. */
  stage(fileName: string): Promise<StagedUpload>;
  /** Charges bytes of a part before they are written (throws to stop the upload). */
  charge(upload: StagedUpload, bytes: number): Promise<void>;
  /** Removes the parts of a refused upload. */
  discard(files: StagedUpload[]): Promise<void>;
}

/**
 * Parses the request into staged files and text fields. On any failure the files written so far
 * are removed (by `discard`) before the error is thrown.
 */
export async function parseUpload(req: IncomingMessage, limits: UploadLimits, staging: UploadStaging): Promise<ParsedUpload> {
  const contentType = req.headers["content-type"] ?? "";
  if (!/^multipart\/form-data/i.test(contentType)) {
    throw new InvalidRequestError("invalid_content_type", `Content-Type: expected multipart/form-data with an audio file, got "${contentType || "none"}"`);
  }
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: req.headers, limits: { fileSize: limits.fileBytes, files: limits.files, fieldSize: FIELD_BYTES, fields: MAX_FIELDS } });
  } catch (err) {
    throw new InvalidRequestError("invalid_multipart", `Content-Type: ${err instanceof Error ? err.message : "malformed multipart header"}`);
  }

  const files: (StagedUpload | undefined)[] = [];
  const fields: Record<string, string> = {};
  const writes: Promise<void>[] = [];
  // Parts being written: busboy's file streams emit no 'close' when destroyed, so a refused
  // upload ends its pipelines by failing the file side.
  const open = new Set<WriteStream>();
  let failure: ApiError | undefined;
  let audioParts = 0;

  const done = new Promise<void>((resolve, reject) => {
    const fail = (err: ApiError) => {
      if (failure) return;
      failure = err;
      req.unpipe(parser);
      for (const out of open) out.destroy(err);
      void drain(req);
      reject(err);
    };
    parser.on("file", (name, stream, info) => {
      // A body that ends inside this part errors the part's stream as well as the parser (which
      // fails the upload). The write below attaches to it only after staging, and an ignored part
      // never does: without a listener from the start, that error would crash the process.
      stream.on("error", () => undefined);
      if (failure || name !== "audio") {
        stream.resume();
        return;
      }
      const index = audioParts++;
      const fileName = info.filename || `audio-${audioParts}`;
      stream.on("limit", () => fail(new PayloadTooLargeError("file_too_large", `audio: "${fileName}" is larger than the ${formatBytes(limits.fileBytes)} limit`)));
      const write = (async () => {
        const staged = await staging.stage(fileName);
        files[index] = staged; // in the order of the parts, however staging interleaves
        if (failure) throw failure;
        const out = createWriteStream(staged.path);
        open.add(out);
        const meter = new Transform({
          transform(chunk: Buffer, _encoding, done) {
            staging.charge(staged, chunk.length).then(() => done(null, chunk), (err: unknown) => done(err as Error));
          },
        });
        try {
          await pipeline(stream, meter, out);
        } finally {
          open.delete(out);
        }
      })();
      // Any failure of a part's write stops the whole upload at once (busboy would otherwise wait
      // on the stalled part until the request times out).
      write.catch((err: unknown) => fail(storageFailure(err)));
      writes.push(write);
    });
    parser.on("field", (name, value, info) => {
      if (info.valueTruncated) fail(new InvalidRequestError("field_too_large", `${name}: longer than ${FIELD_BYTES} bytes`));
      else fields[name] = value;
    });
    parser.on("filesLimit", () => fail(new InvalidRequestError("too_many_files", `audio: at most ${limits.files} files per request`)));
    parser.on("fieldsLimit", () => fail(new InvalidRequestError("too_many_fields", `at most ${MAX_FIELDS} form fields per request`)));
    parser.on("error", (err: Error) => fail(new InvalidRequestError("invalid_multipart", `body: malformed multipart data (${err.message})`)));
    parser.on("close", () => resolve());
    req.on("aborted", () => fail(new InvalidRequestError("upload_aborted", "audio: the upload was interrupted")));
  });
  req.pipe(parser);

  try {
    await done;
    await Promise.all(writes);
    if (failure) throw failure;
  } catch (err) {
    await Promise.allSettled(writes);
    await staging.discard(files.filter((f): f is StagedUpload => f !== undefined));
    throw storageFailure(err);
  }
  const staged = files.filter((f): f is StagedUpload => f !== undefined);
  if (staged.length === 0) throw new InvalidRequestError("missing_audio", "audio: required (a file part named \"audio\")");
  return { files: staged, fields };
}

/** A part's write failure as the client's error: a ApiError as is; a full disk 507; anything else 503. */
function storageFailure(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOSPC" || code === "EDQUOT") return new InsufficientStorageError("audio: this instance's disk is full; try again later");
  return new ServiceUnavailableError("upload_failed", `audio: the upload could not be stored (${code ?? "write failed"}); try again later`);
}


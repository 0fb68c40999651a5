/**
 * Streaming `multipart/form-data` (busboy): every `audio` part goes to disk as it arrives, never
 * whole into memory. Limits are enforced while streaming: a file passing the size limit stops the
 * upload at once with a 413 and its partial file is removed; an 11th `audio` part is a 400; bytes
 * past the staging budget (charged chunk by chunk) stop it with the budget's error (507).
 * Text fields are collected (small, bounded); other file parts are drained and ignored.
 *
 * A `check` of the fields refuses what cannot run as early as the form allows: before the first
 * `audio` part is stored (on the fields sent before it), and again as each later field arrives (the
 * upload stops there and its parts are removed). A client that sends its fields first, as curl -F
 * in order and the OpenAI SDKs do, is refused before a byte of its file is kept.
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
  /** Refuses (throws an ApiError) when the fields so far already say the upload cannot run. */
  check?(fields: Readonly<Record<string, string>>): Promise<void>;
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
  return new Upload(req, parser, limits, staging).run();
}

/**
 * One upload being parsed: the parts written so far, in order, and the first failure. Its states:
 * receiving (parts stream to their files, fields are kept) until busboy closes, then writing
 * (the parts' last bytes land), then staged; or, from any state, failed (the request is drained,
 * the parts' writes stopped and their files discarded).
 */
class Upload {
  private readonly files: (StagedUpload | undefined)[] = [];
  private readonly fields: Record<string, string> = {};
  private readonly writes: Promise<void>[] = [];
  /** Parts being written: busboy's file streams emit no 'close' when destroyed, so a refused upload ends its pipelines by failing the file side. */
  private readonly open = new Set<WriteStream>();
  private failure: ApiError | undefined;
  private audioParts = 0;
  /** The field checks so far, one after another: the first audio part waits for them. */
  private checked: Promise<void> = Promise.resolve();
  private rejectReceiving: (err: ApiError) => void = () => undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly parser: busboy.Busboy,
    private readonly limits: UploadLimits,
    private readonly staging: UploadStaging,
  ) {}

  async run(): Promise<ParsedUpload> {
    try {
      await this.receive();
      await Promise.all(this.writes);
      await this.checked;
      if (this.failure) throw this.failure;
    } catch (err) {
      await Promise.allSettled(this.writes);
      await this.staging.discard(this.staged());
      throw storageFailure(err);
    }
    const files = this.staged();
    if (files.length === 0) throw new InvalidRequestError("missing_audio", 'audio: required (a file part named "audio")');
    return { files, fields: this.fields };
  }

  /** Pipes the request into busboy; resolves when busboy closes, rejects at the first failure. */
  private receive(): Promise<void> {
    const { parser, req, limits } = this;
    const received = new Promise<void>((resolve, reject) => {
      this.rejectReceiving = reject;
      parser.on("file", (name, stream, info) => this.onFile(name, stream, info));
      parser.on("field", (name, value, info) => this.onField(name, value, info));
      parser.on("filesLimit", () => this.fail(new InvalidRequestError("too_many_files", `audio: at most ${limits.files} files per request`)));
      parser.on("fieldsLimit", () => this.fail(new InvalidRequestError("too_many_fields", `at most ${MAX_FIELDS} form fields per request`)));
      parser.on("error", (err: Error) => this.fail(new InvalidRequestError("invalid_multipart", `body: malformed multipart data (${err.message})`)));
      parser.on("close", () => resolve());
      req.on("aborted", () => this.fail(new InvalidRequestError("upload_aborted", "audio: the upload was interrupted")));
    });
    req.pipe(parser);
    return received;
  }

  /** An `audio` part streams to a staged file, charged chunk by chunk; any other part is drained. */
  private onFile(name: string, stream: NodeJS.ReadableStream & { on(event: "limit", listener: () => void): unknown }, info: busboy.FileInfo): void {
    // A body that ends inside this part errors the part's stream as well as the parser (which
    // fails the upload). The write below attaches to it only after staging, and an ignored part
    // never does: without a listener from the start, that error would crash the process.
    stream.on("error", () => undefined);
    if (this.failure || name !== "audio") {
      stream.resume();
      return;
    }
    const index = this.audioParts++;
    const fileName = info.filename || `audio-${this.audioParts}`;
    stream.on("limit", () => this.fail(new PayloadTooLargeError("file_too_large", `audio: "${fileName}" is larger than the ${formatBytes(this.limits.fileBytes)} limit`)));
    const write = this.write(stream, fileName, index);
    // Any failure of a part's write stops the whole upload at once (busboy would otherwise wait
    // on the stalled part until the request times out).
    write.catch((err: unknown) => this.fail(storageFailure(err)));
    this.writes.push(write);
  }

  private async write(stream: NodeJS.ReadableStream, fileName: string, index: number): Promise<void> {
    if (index === 0) this.check();
    await this.checked; // nothing is stored before the fields sent ahead of the file are found runnable
    if (this.failure) throw this.failure;
    const staged = await this.staging.stage(fileName);
    this.files[index] = staged; // in the order of the parts, however staging interleaves
    if (this.failure) throw this.failure;
    const out = createWriteStream(staged.path);
    this.open.add(out);
    const staging = this.staging;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        staging.charge(staged, chunk.length).then(
          () => done(null, chunk),
          (err: unknown) => done(err as Error),
        );
      },
    });
    try {
      await pipeline(stream, meter, out);
    } finally {
      this.open.delete(out);
    }
  }

  private onField(name: string, value: string, info: busboy.FieldInfo): void {
    if (info.valueTruncated) this.fail(new InvalidRequestError("field_too_large", `${name}: longer than ${FIELD_BYTES} bytes`));
    else {
      this.fields[name] = value;
      if (this.audioParts > 0) this.check(); // a field after the file: refused as soon as it arrives
    }
  }

  /** Runs the staging's check on the fields so far, after the ones before; a refusal fails the upload. */
  private check(): void {
    const check = this.staging.check;
    if (!check || this.failure) return;
    const fields = { ...this.fields };
    this.checked = this.checked.then(async () => {
      if (this.failure) return;
      await check.call(this.staging, fields).catch((err: unknown) => this.fail(storageFailure(err)));
    });
  }

  /** The first failure ends the upload: the request is unpiped and drained, the parts' writes stopped. */
  private fail(err: ApiError): void {
    if (this.failure) return;
    this.failure = err;
    this.req.unpipe(this.parser);
    for (const out of this.open) out.destroy(err);
    void drain(this.req);
    this.rejectReceiving(err);
  }

  private staged(): StagedUpload[] {
    return this.files.filter((f): f is StagedUpload => f !== undefined);
  }
}

/** A part's write failure as the client's error: an ApiError as is; a full disk 507; anything else 503. */
function storageFailure(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOSPC" || code === "EDQUOT") return new InsufficientStorageError("audio: this instance's disk is full; try again later");
  return new ServiceUnavailableError("upload_failed", `audio: the upload could not be stored (${code ?? "write failed"}); try again later`);
}

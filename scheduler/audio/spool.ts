/**
 * An upload held on the scheduler's disk while it arrives: written in order by the HTTP request,
 * read from its start by each agent it is forwarded to, as far as it has been written (a reader
 * catches up with the writer and waits for more). Memory holds one chunk per reader; the file is
 * what lets a request move to another agent when the first one dies.
 */
import { randomUUID } from "node:crypto";
import { mkdir, open, readdir, rm, type FileHandle } from "node:fs/promises";
import { join } from "node:path";

/** Bytes a reader takes from the file at once (one AudioChunk on the wire). */
export const SPOOL_READ_BYTES = 256 * 1024;

export class Spool {
  private written = 0;
  private complete = false;
  private failure: Error | undefined;
  private removed = false;
  /** Readers waiting for more bytes, the end, or a failure. */
  private waiting = new Set<() => void>();

  private constructor(
    readonly path: string,
    private readonly file: FileHandle,
  ) {}

  /** A fresh, empty spool file in `dir` (created if needed, mode 0600). */
  static async create(dir: string): Promise<Spool> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const path = join(dir, `${randomUUID()}.upload`);
    return new Spool(path, await open(path, "wx+", 0o600));
  }

  /** Removes the uploads a previous run left in `dir` (no request outlives its scheduler); returns how many. */
  static async sweep(dir: string): Promise<number> {
    const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith(".upload"));
    await Promise.all(names.map((n) => rm(join(dir, n), { force: true })));
    return names.length;
  }

  /** Bytes written so far. */
  get size(): number {
    return this.written;
  }

  /** Whether the upload failed (`fail`). */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  /** Whether the whole upload is written. */
  get ended(): boolean {
    return this.complete;
  }

  /** Writes the next bytes; resolves once they are on disk (the caller reads no more until then). */
  async append(data: Buffer): Promise<void> {
    if (this.complete || this.removed) throw new Error("the spool is closed");
    let offset = 0;
    while (offset < data.length) {
      const { bytesWritten } = await this.file.write(data, offset, data.length - offset, this.written + offset);
      offset += bytesWritten;
    }
    this.written += data.length;
    this.wake();
  }

  /** The upload is whole: readers end after its last byte. */
  end(): void {
    this.complete = true;
    this.wake();
  }

  /** The upload failed: readers waiting for more throw `err`. */
  fail(err: Error): void {
    this.failure ??= err;
    this.wake();
  }

  /**
   * The upload from its first byte, in pieces of at most `SPOOL_READ_BYTES`, following the writer
   * until `end` (or throwing the `fail` error, or the abort reason once `signal` aborts).
   */
  async *read(signal?: AbortSignal): AsyncGenerator<Buffer> {
    let position = 0;
    for (;;) {
      signal?.throwIfAborted();
      if (this.failure) throw this.failure;
      if (this.removed) throw new Error("the spool was removed");
      if (position < this.written) {
        const buffer = Buffer.allocUnsafe(Math.min(SPOOL_READ_BYTES, this.written - position));
        const { bytesRead } = await this.file.read(buffer, 0, buffer.length, position);
        if (bytesRead === 0) throw new Error("the spool file is shorter than what was written to it");
        position += bytesRead;
        yield bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead);
        continue;
      }
      if (this.complete) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          this.waiting.delete(done);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        this.waiting.add(done);
        signal?.addEventListener("abort", done, { once: true });
      });
    }
  }

  /** Closes and deletes the file; readers still waiting end with an error. */
  async remove(): Promise<void> {
    if (this.removed) return;
    this.removed = true;
    this.wake();
    await this.file.close().catch(() => undefined);
    await rm(this.path, { force: true });
  }

  private wake(): void {
    for (const resolve of [...this.waiting]) resolve();
  }
}

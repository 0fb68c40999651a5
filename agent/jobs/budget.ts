/**
 * The staging budget: bytes that uploads may hold on the agent's disk together, from the first
 * byte of an upload until its job no longer needs the file (finished, cancelled or deleted).
 * A request that declares its length (Content-Length) reserves it at once, so it is refused before
 * a byte is sent when it cannot fit, and uploads already streaming are never starved by newcomers;
 * one without a length is charged as it streams. The disk itself is asked (statfs) before an
 * upload starts and every `CHECK_EVERY` bytes, so other writers on the same disk count too.
 */
import { freeBytes } from "../../core/disk.js";
import { InsufficientStorageError } from "../../core/errors.js";

/** Free bytes the disk keeps whatever the budget says: uploads stop before the disk is full. */
export const DISK_FLOOR = 256 * 1024 ** 2;
/** Bytes an upload may write between two statfs calls. */
const CHECK_EVERY = 64 * 1024 ** 2;

export interface StagingBudgetOptions {
  /** Bytes all staged uploads may take together. */
  limitBytes: number;
  /** The folder uploads go to: its file system is the one asked for free space. */
  dir: string;
  /** Free bytes the disk must keep (default `DISK_FLOOR`). */
  floorBytes?: number;
}

export class StagingBudget {
  private used = 0;
  /** Bytes reserved at admission and not written yet: the disk must still have room for them. */
  private pending = 0;
  private readonly unchecked = new WeakMap<object, number>();

  constructor(private readonly options: StagingBudgetOptions) {}

  /** Bytes held by uploads now (reserved or written). */
  get usedBytes(): number {
    return this.used;
  }

  /**
   * Admits a new upload of `declared` bytes (0: unknown), reserving them before anything is
   * awaited (so parallel admissions cannot overcommit): throws `InsufficientStorageError` when
   * they do not fit the budget or the disk, with nothing reserved.
   */
  async admit(declared = 0): Promise<void> {
    if (declared > this.options.limitBytes) {
      throw new InsufficientStorageError(`audio: this upload (${formatMb(declared)}) is larger than this instance's staging budget (${formatMb(this.options.limitBytes)})`);
    }
    if (this.used + declared > this.options.limitBytes || this.used >= this.options.limitBytes) throw this.overBudget();
    this.used += declared;
    this.pending += declared;
    await this.checkDisk(0).catch((err: unknown) => {
      this.used -= declared;
      this.pending -= declared;
      throw err;
    });
  }

  /**
   * Charges `bytes` more written by `owner` (one upload), of which `prepaid` come out of its
   * reservation. The accounting is done before anything is awaited; on a refusal
   * (`InsufficientStorageError`: past the budget, or the disk running low) it is undone.
   */
  async charge(owner: object, bytes: number, prepaid = 0): Promise<void> {
    const extra = bytes - Math.min(bytes, prepaid);
    if (this.used + extra > this.options.limitBytes) throw this.overBudget();
    this.used += extra;
    this.pending -= bytes - extra;
    const since = (this.unchecked.get(owner) ?? 0) + bytes;
    if (since < CHECK_EVERY) {
      this.unchecked.set(owner, since);
      return;
    }
    this.unchecked.set(owner, 0);
    await this.checkDisk(bytes).catch((err: unknown) => {
      this.used -= extra;
      this.pending += bytes - extra;
      throw err;
    });
  }

  /** Gives back bytes written by an upload that is gone (refused, finished, deleted). */
  release(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }

  /** Gives back the unused part of a reservation. */
  unreserve(bytes: number): void {
    this.pending = Math.max(0, this.pending - bytes);
    this.release(bytes);
  }

  /** Counts bytes already on disk at start (the uploads of jobs that resume). */
  hold(bytes: number): void {
    this.used += bytes;
  }

  /** Refuses when the disk, less what admitted uploads may still write and `incoming`, would keep under the floor. */
  private async checkDisk(incoming: number): Promise<void> {
    const free = await freeBytes(this.options.dir);
    if (free - this.pending - incoming < (this.options.floorBytes ?? DISK_FLOOR)) {
      throw new InsufficientStorageError(`audio: this instance's disk is nearly full (${formatMb(free)} free); try again later`);
    }
  }

  private overBudget(): InsufficientStorageError {
    return new InsufficientStorageError(
      `audio: the uploads in progress and the jobs waiting already hold this instance's staging budget (${formatMb(this.options.limitBytes)}); try again later`,
    );
  }
}

function formatMb(bytes: number): string {
  return `${Math.floor(bytes / 1024 ** 2)} MB`;
}

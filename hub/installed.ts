/**
 * What is installed in a model folder, and what Kiln knows of each file: a small record,
 * `.kiln-models.json`, beside the files. A pull writes the file's sha256, size, where it came from
 * and the references it answers to (so `hf:org/repo:Q4_K_M` finds its cached file without asking
 * the hub again). A file copied in by hand has no record until `kiln models list` hashes it.
 * The record is written whole to a temporary file and renamed: a crash leaves the old one.
 */
import { readFile, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { sha256OfFile } from "../core/digest.js";

export const RECORD_FILE = ".kiln-models.json";

/** What Kiln knows of one installed file. */
export interface FileRecord {
  sha256: string;
  size: number;
  /** Modification time when hashed (ms): a file changed since is hashed again. */
  mtimeMs: number;
  /** The references pulled into this file. */
  refs: string[];
  /** The URL it was downloaded from (no token), when Kiln downloaded it. */
  source?: string;
}

export type Records = Record<string, FileRecord>;

/** Whether a record read from disk has the fields Kiln writes (a hand-edited one may not). */
const wellFormed = (r: unknown): r is FileRecord => {
  const x = r as FileRecord | null;
  return (
    typeof x === "object" &&
    x !== null &&
    typeof x.sha256 === "string" &&
    typeof x.size === "number" &&
    typeof x.mtimeMs === "number" &&
    Array.isArray(x.refs) &&
    x.refs.every((s) => typeof s === "string")
  );
};

/** The folder's records; one that is malformed is left out (its file is hashed again), a missing or unreadable file reads as none. */
export async function readRecords(dir: string): Promise<Records> {
  let files: unknown;
  try {
    files = (JSON.parse(await readFile(join(dir, RECORD_FILE), "utf8")) as { files?: unknown }).files;
  } catch {
    return {};
  }
  if (typeof files !== "object" || files === null) return {};
  return Object.fromEntries(Object.entries(files).filter(([, r]) => wellFormed(r))) as Records;
}

async function writeRecords(dir: string, files: Records): Promise<void> {
  const path = join(dir, RECORD_FILE);
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify({ files }, null, 2)}\n`);
  await rename(temp, path);
}

/** Changes the record of `file` (`undefined`: removes it). Records are written one change at a time per folder. */
export async function updateRecord(dir: string, file: string, change: (now: FileRecord | undefined) => FileRecord | undefined): Promise<void> {
  const previous = writes.get(dir) ?? Promise.resolve();
  const next = previous.then(async () => {
    const files = await readRecords(dir);
    const updated = change(files[file]);
    if (updated) files[file] = updated;
    else delete files[file];
    await writeRecords(dir, files);
  });
  writes.set(
    dir,
    next.catch(() => undefined),
  );
  return next;
}
const writes = new Map<string, Promise<void>>();

/**
 * The file's record, hashing it (and recording that) when it has none or changed since. Undefined
 * when the file is missing. `records`: the folder's, when the caller read them already.
 */
export async function recordOf(dir: string, file: string, records?: Records): Promise<FileRecord | undefined> {
  const s = await stat(join(dir, file)).catch(() => undefined);
  if (!s?.isFile()) return undefined;
  const known = (records ?? (await readRecords(dir)))[file];
  if (known && known.size === s.size && known.mtimeMs === s.mtimeMs) return known;
  const sha256 = await sha256OfFile(join(dir, file));
  const record: FileRecord = { sha256, size: s.size, mtimeMs: s.mtimeMs, refs: known?.refs ?? [], ...(known?.source ? { source: known.source } : {}) };
  // kept for the next read when the folder is writable; a read-only one is hashed again next time
  await updateRecord(dir, file, () => record).catch(() => undefined);
  return record;
}

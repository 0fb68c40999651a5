/**
 * Downloads one file into a model folder, whole and checked, or not at all:
 *
 * 1. the hub is asked where the file is and what it is (remote.ts: redirects, size, sha256);
 * 2. the free disk is checked (statfs) before a byte is written;
 * 3. node-llama-cpp's downloader (ipull: parallel connections, progress kept in 5-MiB chunks of its
 *    `.ipull` file) fetches it into `<dir>/.partial/`; a connection cut off is taken up again from
 *    the last whole chunk, and a download that sends nothing for `stallSeconds` is stopped;
 * 4. its sha256 is computed and compared: the catalog's for whisper files, the hub's
 *    `x-linked-etag` for GGUFs when the hub sends one; a mismatch deletes it and fails;
 * 5. only then is it renamed into `<dir>/<file>`, and recorded (installed.ts).
 *
 * A lock file in `.partial/` keeps a second Kiln process (`kiln models pull` beside an agent)
 * from writing the same file at the same time: the second waits, and finds the file installed.
 *
 * A split GGUF's parts come as one set (`downloadFiles`): one lock, every part asked about, one disk
 * check for all the bytes the set lacks, each part fetched and checked as above, and none in place
 * before every one is (the first part, which llama.cpp loads, last).
 */
import { randomUUID } from "node:crypto";
import { link, mkdir, readFile, rename, rm, stat, truncate, utimes, writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { join } from "node:path";
import { createModelDownloader, type ModelDownloader } from "node-llama-cpp";
import { untilAborted } from "../core/abort.js";
import { freeBytes, nonEmptyFile } from "../core/disk.js";
import { sha256OfFile } from "../core/digest.js";
import { PullError } from "./errors.js";
import { recordOf, updateRecord } from "./installed.js";
import { splitOf } from "./refs.js";
import { hubLabel, onHub, probeFile, type HubSource, type RemoteFile } from "./remote.js";

/** Where a download's parts wait until the file is whole and checked. */
export const PARTIAL_DIR = ".partial";

/** How a download is going (also what `onProgress` gets). */
export interface PullProgress {
  /** Bytes on disk so far. */
  downloadedBytes: number;
  /** The file's size; 0 while not known yet. */
  totalBytes: number;
  /** Average speed of the transfer. */
  bytesPerSecond: number;
  /** Seconds left at the current speed; Infinity while unknown. */
  etaSeconds: number;
}

/** One file to download. */
export interface FileDownload {
  /** The reference, as messages name it (`whisper:small`, `hf:org/repo/file.gguf`). */
  ref: string;
  /** Its address on the hub (`{hub}/{repo}/resolve/{revision}/{file}`). */
  url: string;
  /** The folder it is installed in. */
  dir: string;
  /** Its file name there. */
  file: string;
  /** The sha256 the file must have (the catalog's); without one, the hub's is used when it sends one. */
  sha256?: string;
  /** The size the catalog expects, used for the disk check when the hub does not say. */
  sizeBytes?: number;
}

export interface DownloadOptions {
  /** The hub and its token. */
  hub: HubSource;
  /** Free bytes a download must leave on the disk. Default 512 MiB. */
  reserveBytes?: number;
  /** Tries after a failed transfer, each resuming where the last stopped. Default 2. */
  retries?: number;
  /** A transfer that adds no byte for this long is stopped (and tried again). Default 60. */
  stallSeconds?: number;
  /** Draws node-llama-cpp's progress bar on the terminal. Default false. */
  progressBar?: boolean;
  /** Told how the transfer goes, many times a second. Default: nobody. */
  onProgress?: (progress: PullProgress) => void;
  /** Stops the download; its part is kept for the next pull to resume. */
  signal?: AbortSignal;
}

/** The installed file. */
export interface Installed {
  /** Where it is. */
  path: string;
  /** Its sha256 (hex), computed over the bytes written. */
  sha256: string;
  /** Its size in bytes. */
  size: number;
}

const DEFAULT_RESERVE_BYTES = 512 * 1024 ** 2;
/** A hub's answer older than this is asked again before a transfer starts. */
const PROBE_FRESH_MS = 60_000;

const human = (n: number) => (n >= 1e9 ? `${(n / 1e9).toFixed(1)} GB` : `${Math.max(0, Math.round(n / 1e6))} MB`);

export async function downloadFile(d: FileDownload, options: DownloadOptions): Promise<Installed> {
  return (await downloadFiles([d], options))[0]!;
}

/**
 * A set of files that serve only together (the parts of a split GGUF, first part first), whole and
 * checked or not at all: one lock (the first file's), every file asked about first, one disk check for
 * the bytes the set still lacks, then each file fetched and checked in turn. A checked file waits in
 * `.partial/` (recorded there, so that a pull stopped later does not fetch or hash it again) until every
 * one is; then they are renamed into place, the first last: its path, which llama.cpp loads, appears
 * only once the others are there. The files are returned in order.
 */
export async function downloadFiles(files: FileDownload[], options: DownloadOptions): Promise<Installed[]> {
  const prefix = `${files[0]!.ref} could not be fetched from ${hubLabel(options.hub)}`;
  try {
    return await download(files, options);
  } catch (err) {
    if (options.signal?.aborted && err === options.signal.reason) throw err;
    if (err instanceof PullError && !err.message.startsWith(prefix)) throw new PullError(err.code, `${prefix}: ${err.message}`, { cause: err });
    throw err;
  }
}

/** One file of a set on its way: where the hub has it, what it must be, and once fetched and checked, what it is. */
interface Pending {
  d: FileDownload;
  remote: RemoteFile;
  /** When the hub was asked (ms): a set's later part is asked again before its transfer, its CDN address signed for a while only. */
  probedAt: number;
  what: string;
  expected?: string;
  size?: number;
  checked?: { sha256: string; size: number };
}

async function download(files: FileDownload[], options: DownloadOptions): Promise<Installed[]> {
  const { hub, signal } = options;
  const first = files[0]!;
  const set = files.length > 1;
  const partialDir = join(first.dir, PARTIAL_DIR);
  await mkdir(partialDir, { recursive: true });
  const unlock = await lock(join(partialDir, `${first.file}.lock`), signal);
  try {
    // another process may have installed them while this one waited for the lock
    const there = await Promise.all(files.map(async (d) => ((await nonEmptyFile(join(d.dir, d.file))) ? await recordOf(d.dir, d.file) : undefined)));
    const pending: Pending[] = [];
    for (const [i, d] of files.entries()) {
      if (there[i]) continue;
      const what = new URL(d.url).pathname.slice(1);
      const remote = await probeFile(d.url, hub, what, signal);
      if (d.sha256 && remote.sha256 && remote.sha256 !== d.sha256) {
        throw new PullError("checksum_mismatch", `the hub's file has sha256 ${remote.sha256}, not the catalog's ${d.sha256}`);
      }
      const expected = d.sha256 ?? remote.sha256;
      const size = Math.max(remote.size ?? 0, d.sizeBytes ?? 0) || undefined;
      // a part of a set that an earlier pull fetched and checked waits in .partial/, recorded
      const checked = set ? await checkedPart(d, expected, size) : undefined;
      pending.push({ d, remote, probedAt: Date.now(), what, ...(expected ? { expected } : {}), ...(size !== undefined ? { size } : {}), ...(checked ? { checked } : {}) });
    }
    if (pending.length === 0) return files.map((d, i) => ({ path: join(d.dir, d.file), sha256: there[i]!.sha256, size: there[i]!.size }));
    await checkDisk(
      first.dir,
      partialDir,
      pending.filter((p) => !p.checked && p.size !== undefined).map((p) => ({ file: p.d.file, size: p.size! })),
      options.reserveBytes ?? DEFAULT_RESERVE_BYTES,
    );

    const total = pending.reduce((n, p) => n + (p.size ?? 0), 0);
    let done = pending.reduce((n, p) => n + (p.checked?.size ?? 0), 0);
    for (const p of pending) {
      if (p.checked) continue;
      // a set's progress is the set's: what its checked files hold, and this one's bytes
      const onProgress =
        set && options.onProgress
          ? (q: PullProgress) => {
              const downloadedBytes = done + q.downloadedBytes;
              const totalBytes = Math.max(total, downloadedBytes);
              options.onProgress!({
                downloadedBytes,
                totalBytes,
                bytesPerSecond: q.bytesPerSecond,
                etaSeconds: q.bytesPerSecond > 0 ? (totalBytes - downloadedBytes) / q.bytesPerSecond : Infinity,
              });
            }
          : options.onProgress;
      p.checked = await fetchChecked(p, partialDir, set, { ...options, ...(onProgress ? { onProgress } : {}) });
      done += p.checked.size;
    }

    // every file whole and checked: into place, the first last
    const installed = new Map<string, Installed>();
    for (const p of [...pending].reverse()) {
      const { d, checked } = p;
      const path = join(d.dir, d.file);
      await rename(join(partialDir, d.file), path);
      const s = await stat(path);
      // installed now: a record that cannot be written (a folder another user owns) is made again by the next read
      await updateRecord(d.dir, d.file, (now) => ({
        sha256: checked!.sha256,
        size: s.size,
        mtimeMs: s.mtimeMs,
        refs: [...new Set([...(now?.refs ?? []), d.ref])],
        source: d.url,
      })).catch(() => undefined);
      if (set) await updateRecord(d.dir, `${PARTIAL_DIR}/${d.file}`, () => undefined).catch(() => undefined);
      installed.set(d.file, { path, sha256: checked!.sha256, size: s.size });
    }
    return files.map((d, i) => installed.get(d.file) ?? { path: join(d.dir, d.file), sha256: there[i]!.sha256, size: there[i]!.size });
  } finally {
    await unlock();
  }
}

/** A part of a set fetched and checked by an earlier pull, waiting in `.partial/`: its sha256 and size, or undefined (a part that is not what the hub has now is deleted). */
async function checkedPart(d: FileDownload, expected: string | undefined, size: number | undefined): Promise<{ sha256: string; size: number } | undefined> {
  const key = `${PARTIAL_DIR}/${d.file}`;
  const record = await recordOf(d.dir, key);
  if (!record) return undefined;
  if ((expected && record.sha256 === expected) || (!expected && size !== undefined && record.size === size)) return { sha256: record.sha256, size: record.size };
  await rm(join(d.dir, key), { force: true });
  await updateRecord(d.dir, key, () => undefined).catch(() => undefined);
  return undefined;
}

/** One file fetched into `.partial/` (tried again from where it stopped) and checked: a mismatch deletes it. A set's file is recorded there once checked. */
async function fetchChecked(p: Pending, partialDir: string, set: boolean, options: DownloadOptions): Promise<{ sha256: string; size: number }> {
  const { hub, signal } = options;
  const { d } = p;
  const partial = join(partialDir, d.file);
  let remote = p.remote;
  const retries = options.retries ?? 2;
  for (let attempt = 0; ; attempt++) {
    try {
      // asked again at each try, and when asked a while ago: a CDN's signed address expires
      if (attempt > 0 || Date.now() - p.probedAt > PROBE_FRESH_MS) remote = await probeFile(d.url, hub, p.what, signal);
      await transfer(d, remote.url, partialDir, remote.size, options);
      break;
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof PullError && err.code !== "hub_unreachable") throw err;
      if (attempt >= retries)
        throw new PullError("hub_unreachable", `the transfer failed ${attempt + 1} times (${describe(err)}); run the pull again to resume it`, { cause: err });
      await sleep(500 * 2 ** attempt, undefined, signal ? { signal } : {});
    }
  }

  const got = await sha256OfFile(partial);
  if (p.expected && got !== p.expected) {
    await rm(partial, { force: true });
    const split = set ? splitOf(d.file) : undefined;
    const which = split ? `part ${split.part} of ${split.count} (${p.what})` : "the downloaded file";
    throw new PullError("checksum_mismatch", `${which} has sha256 ${got}, not ${p.expected}; it was deleted`);
  }
  const s = await stat(partial);
  if (set) {
    await updateRecord(d.dir, `${PARTIAL_DIR}/${d.file}`, () => ({ sha256: got, size: s.size, mtimeMs: s.mtimeMs, refs: [], source: d.url })).catch(() => undefined);
  }
  return { sha256: got, size: s.size };
}

/** Refuses downloads the disk cannot hold (what their parts already hold counted, by the blocks they really take). */
async function checkDisk(dir: string, partialDir: string, files: { file: string; size: number }[], reserve: number): Promise<void> {
  if (files.length === 0) return;
  let needed = 0;
  for (const { file, size } of files) {
    // the .ipull part holds ipull's progress record after the bytes, and is written sparsely by parallel connections: its blocks say what it holds
    const held = await stat(join(partialDir, `${file}.ipull`)).then(
      (s) => Math.min(s.blocks * 512, size),
      () => 0,
    );
    needed += size - held;
  }
  const free = await freeBytes(partialDir);
  if (free - needed < reserve) {
    throw new PullError(
      "insufficient_disk",
      `it needs ${human(needed)} more on the disk of ${dir}, which has ${human(free)} free (and keeps ${human(reserve)} spare): free some space or pick another folder`,
    );
  }
}

/** One transfer by node-llama-cpp's downloader, resuming its part; stopped when it stalls; refused when the hub sends another size than it announced. */
async function transfer(d: FileDownload, url: string, partialDir: string, announced: number | undefined, options: DownloadOptions): Promise<void> {
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  const stallMs = (options.stallSeconds ?? 60) * 1000;
  let last = -1;
  let watchdog: NodeJS.Timeout | undefined;
  const watch = () => {
    clearTimeout(watchdog);
    watchdog = setTimeout(() => stop.abort(new PullError("hub_unreachable", `no byte arrived for ${stallMs / 1000} s`)), stallMs).unref();
  };
  watch();
  let downloader: ModelDownloader | undefined;
  try {
    const creating = createModelDownloader({
      modelUri: oneFile(url),
      dirPath: partialDir,
      fileName: d.file,
      showCliProgress: options.progressBar ?? false,
      // kept on a stop: the next pull resumes it
      deleteTempFileOnCancel: false,
      // the hub's token for the hub's origin only (null: none at all; without it node-llama-cpp would read HF_TOKEN or
      // ~/.cache/huggingface/token and send that). Its runtime honours null although its type omits it.
      endpoints: { huggingFace: `${options.hub.url.replace(/\/+$/, "")}/` },
      tokens: { huggingFace: options.hub.token && onHub(options.hub, url) ? options.hub.token : (null as unknown as string) },
      onProgress: (p) => {
        if (p.downloadedSize > last) {
          last = p.downloadedSize;
          watch();
        }
        options.onProgress?.({
          downloadedBytes: p.downloadedSize,
          totalBytes: p.totalSize,
          bytesPerSecond: p.averageSpeed,
          // ipull says 35 days for a stalled transfer: unknown
          etaSeconds: p.estimatedTimeLeft > 0 && p.estimatedTimeLeft < 86_400_000 ? p.estimatedTimeLeft / 1000 : Infinity,
        });
      },
    });
    downloader = await untilAborted(creating, signal, { late: (late) => void late.cancel({ deleteTempFile: false }).catch(() => undefined) });
    if (announced !== undefined && downloader.totalSize > 0 && downloader.totalSize !== announced) {
      throw new PullError("checksum_mismatch", `the hub announced ${announced} bytes but sends ${downloader.totalSize}`);
    }
    // raced with the signal: ipull retries a failed connection on its own, long after a cancel
    await untilAborted(downloader.download({ signal }), signal);
    if (signal.aborted) throw signal.reason; // a cancelled download ends without an error of its own
    // ipull keeps its progress record after the file's bytes and cuts it off at the end, but does not wait for its
    // last write of the record first: that write can land after the cut, leaving the record at the file's end
    // (a checksum mismatch, or with no sha256 to check, a wrong file installed). Its writes are done once
    // download() returns (the file is closed), so the file is cut back to the size ipull fetched (it keeps no
    // record of a file whose size it does not know).
    const size = downloader.totalSize;
    if (size > 0) {
      const path = join(partialDir, d.file);
      if ((await stat(path)).size > size) await truncate(path, size);
    }
  } catch (err) {
    if (signal.aborted) await downloader?.cancel({ deleteTempFile: false }).catch(() => undefined);
    throw stop.signal.aborted ? stop.signal.reason : err;
  } finally {
    clearTimeout(watchdog);
  }
}

/**
 * The address as node-llama-cpp's downloader is handed it. Given an address whose path ends like a
 * split GGUF's part (`-00002-of-00003.gguf`), or a binary-split one's (`.gguf.part2of3`), it would
 * fetch every part of the set itself (under names of its own, past the checks here): the path's last
 * dot is percent-encoded (`%2E`), which servers decode to the same file, so that it fetches this one.
 */
export function oneFile(url: string): string {
  const u = new URL(url);
  if (!/-\d{5}-of-\d{5}\.gguf$/i.test(u.pathname) && !/\.gguf\.part\d+of\d+$/i.test(u.pathname)) return url;
  const dot = u.pathname.lastIndexOf(".");
  u.pathname = `${u.pathname.slice(0, dot)}%2E${u.pathname.slice(dot + 1)}`;
  return u.href;
}

/** A failure in general terms: no address (ipull names the signed CDN address it used). */
function describe(err: unknown): string {
  return ((err as Error)?.message ?? String(err)).replace(/https?:\/\/\S+/g, "<address>").slice(0, 200);
}

/** A lock whose holder has not touched it for this long is taken over (its process died, and its pid may be reused). */
const LOCK_STALE_MS = 120_000;

/**
 * Takes `path` as a lock, written whole (a file with this process's pid and a token, linked into
 * place) and touched while held; waits while a live process holds it. A lock whose process is gone,
 * or that nobody touched for two minutes, is taken over. Returns the release, which removes the lock
 * only while it is still this one.
 */
async function lock(path: string, signal?: AbortSignal): Promise<() => Promise<void>> {
  const token = `${process.pid} ${randomUUID()}`;
  const mine = `${path}.${randomUUID()}`;
  await writeFile(mine, token);
  try {
    for (;;) {
      try {
        await link(mine, path);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const held = await readFile(path, "utf8").catch(() => "");
      const age = await stat(path).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      const pid = Number(held.split(" ")[0]);
      if (held && (!(pid > 0) || !alive(pid) || age > LOCK_STALE_MS)) {
        // taken away by one process only; one that moved a fresh lock by mistake puts it back
        const moved = `${path}.stale.${randomUUID()}`;
        if (
          await rename(path, moved).then(
            () => true,
            () => false,
          )
        ) {
          if ((await readFile(moved, "utf8").catch(() => "")) !== held) await link(moved, path).catch(() => undefined);
          await rm(moved, { force: true });
        }
        continue;
      }
      await sleep(1000, undefined, signal ? { signal } : {}); // another process downloads it: wait, then find it installed
    }
  } finally {
    await rm(mine, { force: true });
  }
  const beat = setInterval(() => void utimes(path, new Date(), new Date()).catch(() => undefined), LOCK_STALE_MS / 4).unref();
  return async () => {
    clearInterval(beat);
    if ((await readFile(path, "utf8").catch(() => "")) === token) await rm(path, { force: true });
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Downloads one file into a model folder, whole and checked, or not at all:
 *
 * 1. the hub is asked for the file's size and sha256 (remote.ts);
 * 2. the free disk is checked (statfs) before a byte is written;
 * 3. node-llama-cpp's downloader (ipull: parallel connections, resume from its `.ipull` progress
 *    file) fetches it into `<dir>/.partial/`; a connection cut off is retried, resuming;
 * 4. its sha256 is computed and compared: the catalog's for whisper files, the hub's
 *    `x-linked-etag` for GGUFs when the hub sends one; a mismatch deletes it and fails;
 * 5. only then is it renamed into `<dir>/<file>`, and recorded (installed.ts).
 */
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { createModelDownloader } from "node-llama-cpp";
import { freeBytes } from "../core/disk.js";
import { sha256OfFile } from "../core/digest.js";
import { PullError } from "./errors.js";
import { updateRecord } from "./installed.js";
import { hubLabel, probeFile, type HubSource } from "./remote.js";

/** Where a download's parts wait until the file is whole and checked. */
export const PARTIAL_DIR = ".partial";

/** How a download is going (also what `onProgress` gets). */
export interface PullProgress {
  downloadedBytes: number;
  /** 0 while the size is not known yet. */
  totalBytes: number;
  bytesPerSecond: number;
  /** Seconds left at the current speed; Infinity while unknown. */
  etaSeconds: number;
}

export interface FileDownload {
  /** The reference, as messages name it (`whisper:small`, `hf:org/repo/file.gguf`). */
  ref: string;
  url: string;
  dir: string;
  file: string;
  /** The sha256 the file must have (the catalog's); without one, the hub's is used when it sends one. */
  sha256?: string;
  /** The size the catalog expects, used for the disk check when the hub does not say. */
  sizeBytes?: number;
}

export interface DownloadOptions {
  hub: HubSource;
  /** Free bytes a download must leave on the disk. Default 512 MiB. */
  reserveBytes?: number;
  /** Connections tried after a failure, each resuming where the last stopped. Default 3. */
  retries?: number;
  /** Draws node-llama-cpp's progress bar on the terminal. Default false. */
  progressBar?: boolean;
  onProgress?: (progress: PullProgress) => void;
  signal?: AbortSignal;
}

/** The installed file. */
export interface Installed {
  path: string;
  sha256: string;
  size: number;
}

export const DEFAULT_RESERVE_BYTES = 512 * 1024 ** 2;

const human = (n: number) => (n >= 1e9 ? `${(n / 1e9).toFixed(1)} GB` : `${Math.max(0, Math.round(n / 1e6))} MB`);

export async function downloadFile(d: FileDownload, options: DownloadOptions): Promise<Installed> {
  const { hub, signal } = options;
  const what = `${d.ref} could not be fetched from ${hubLabel(hub)}`;
  const partialDir = join(d.dir, PARTIAL_DIR);
  await mkdir(partialDir, { recursive: true });

  const remote = await probeFile(d.url, hub, what, signal);
  if (d.sha256 && remote.sha256 && remote.sha256 !== d.sha256) {
    throw new PullError("checksum_mismatch", `${what}: the hub's file has sha256 ${remote.sha256}, not the catalog's ${d.sha256}`);
  }
  const expected = d.sha256 ?? remote.sha256;
  const size = remote.size ?? d.sizeBytes;
  if (size !== undefined) {
    const started = await stat(join(partialDir, `${d.file}.ipull`)).then(
      (s) => Math.min(s.size, size),
      () => 0,
    );
    const free = await freeBytes(partialDir);
    const reserve = options.reserveBytes ?? DEFAULT_RESERVE_BYTES;
    if (free - (size - started) < reserve) {
      throw new PullError(
        "insufficient_disk",
        `${d.ref} needs ${human(size - started)} more on the disk of ${d.dir}, which has ${human(free)} free (and keeps ${human(reserve)} spare): free some space or pick another folder`,
      );
    }
  }

  const partial = join(partialDir, d.file);
  const retries = options.retries ?? 3;
  for (let attempt = 0; ; attempt++) {
    try {
      const downloader = await createModelDownloader({
        modelUri: d.url,
        dirPath: partialDir,
        fileName: d.file,
        showCliProgress: options.progressBar ?? false,
        // kept on a stop: the next pull resumes it
        deleteTempFileOnCancel: false,
        // the token goes to the hub (and only there): its endpoint is this hub
        endpoints: { huggingFace: `${hub.url.replace(/\/+$/, "")}/` },
        // null: no token (node-llama-cpp would otherwise read HF_TOKEN or ~/.cache/huggingface/token and send it to this hub, a mirror
        // maybe); its runtime honours null although its type omits it
        tokens: { huggingFace: hub.token ?? (null as unknown as string) },
        ...(options.onProgress
          ? {
              onProgress: (p: { totalSize: number; downloadedSize: number; estimatedTimeLeft: number; averageSpeed: number }) =>
                options.onProgress!({ downloadedBytes: p.downloadedSize, totalBytes: p.totalSize, bytesPerSecond: p.averageSpeed, etaSeconds: p.estimatedTimeLeft / 1000 }),
            }
          : {}),
      });
      await downloader.download(signal ? { signal } : {});
      if (signal?.aborted) throw signal.reason; // a cancelled download ends without an error of its own
      break;
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof PullError || attempt >= retries) throw new PullError("hub_unreachable", `${what}: ${(err as Error).message}`, { cause: err });
      await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
    }
  }

  const got = await sha256OfFile(partial);
  if (expected && got !== expected) {
    await rm(partial, { force: true });
    throw new PullError("checksum_mismatch", `${what}: the downloaded file has sha256 ${got}, not ${expected}; it was deleted`);
  }
  const path = join(d.dir, d.file);
  await rename(partial, path);
  const s = await stat(path);
  await updateRecord(d.dir, d.file, (now) => ({ sha256: got, size: s.size, mtimeMs: s.mtimeMs, refs: [...new Set([...(now?.refs ?? []), d.ref])], source: d.url }));
  return { path, sha256: got, size: s.size };
}

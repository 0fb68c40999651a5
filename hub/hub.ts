/**
 * The models of one machine: its whisper folder and its GGUF folder, filled from a model hub.
 * `pull` turns a reference (refs.ts) into a checked file (download.ts); pulls of the same file
 * share one download, each caller told its progress. `cached` answers without the network,
 * `list` says what is installed and `remove` deletes it.
 */
import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { WhisperCatalog } from "../models/whisper.js";
import { PullError } from "./errors.js";
import { downloadFile, PARTIAL_DIR, type FileDownload, type Installed, type PullProgress } from "./download.js";
import { readRecords, recordOf, RECORD_FILE, updateRecord } from "./installed.js";
import { ggufFileName, parseRef, type ModelRef } from "./refs.js";
import { hubLabel, resolveQuant, resolveUrl, type HubSource } from "./remote.js";

export interface ModelHubOptions {
  /** The hub (`--hub-url`, default https://huggingface.co) and its token (`HF_TOKEN`). */
  source: HubSource;
  /** `--whisper-dir`: where whisper files go. */
  whisperDir: string;
  /** `--models-dir`: where GGUF files go. */
  modelsDir: string;
  catalog: WhisperCatalog;
  /** Free bytes every download leaves on the disk. Default 512 MiB. */
  reserveBytes?: number;
}

export interface PullOptions {
  onProgress?: (progress: PullProgress) => void;
  /** Stops this caller's wait; the download goes on for the others (and is kept to resume). */
  signal?: AbortSignal;
  /** Draws a progress bar on the terminal (`kiln models pull` on a TTY). Default false. */
  progressBar?: boolean;
}

/** A pulled (or already installed) file. */
export interface Pulled extends Installed {
  ref: string;
  /** Whether it was there already (nothing was fetched). */
  cached: boolean;
}

/** An installed file as `kiln models list` shows it. */
export interface InstalledFile {
  kind: "whisper" | "gguf" | "other";
  path: string;
  size: number;
  sha256: string;
  /** The names it serves: whisper catalog names, the references pulled into it. */
  ids: string[];
}

interface Flight {
  promise: Promise<Installed>;
  listeners: Set<(p: PullProgress) => void>;
  progress?: PullProgress;
}

export class ModelHub {
  private readonly flights = new Map<string, Flight>();
  private readonly stop = new AbortController();

  constructor(private readonly options: ModelHubOptions) {}

  get hub(): string {
    return hubLabel(this.options.source);
  }

  /** The installed file a reference names, without asking the hub; undefined when not installed. */
  async cached(text: string): Promise<string | undefined> {
    const ref = parseRef(text);
    const { dir, file } = await this.place(ref, false);
    if (file === undefined) return undefined;
    const s = await stat(join(dir, file)).catch(() => undefined);
    return s?.isFile() && s.size > 0 ? join(dir, file) : undefined;
  }

  /** The download under way for a reference, if any. */
  async progress(text: string): Promise<PullProgress | undefined> {
    const { dir, file } = await this.place(parseRef(text), false);
    const flight = file === undefined ? undefined : this.flights.get(join(dir, file));
    return flight && (flight.progress ?? { downloadedBytes: 0, totalBytes: 0, bytesPerSecond: 0, etaSeconds: Infinity });
  }

  /** Installs what the reference names (a cached file is not fetched again) and returns it. */
  async pull(text: string, options: PullOptions = {}): Promise<Pulled> {
    const ref = parseRef(text);
    const cached = await this.cached(ref.ref);
    if (cached) {
      const record = await recordOf(this.dirOf(ref), cached.slice(this.dirOf(ref).length + 1));
      return { ref: ref.ref, path: cached, sha256: record!.sha256, size: record!.size, cached: true };
    }
    const download = await this.download(ref, options.signal);
    // one download per file, whichever names ask for it (`whisper:large` and `whisper:large-v3` share one)
    const key = join(download.dir, download.file);
    let flight = this.flights.get(key);
    if (!flight) {
      const listeners = new Set<(p: PullProgress) => void>();
      const started: Flight = {
        listeners,
        promise: downloadFile(download, {
          hub: this.options.source,
          signal: this.stop.signal,
          ...(options.progressBar ? { progressBar: true } : {}),
          ...(this.options.reserveBytes !== undefined ? { reserveBytes: this.options.reserveBytes } : {}),
          onProgress: (p) => {
            started.progress = p;
            for (const l of listeners) l(p);
          },
        }).finally(() => this.flights.delete(key)),
      };
      flight = started;
      this.flights.set(key, flight);
    }
    if (options.onProgress) flight.listeners.add(options.onProgress);
    try {
      const installed = await waitFor(flight.promise, options.signal);
      return { ref: ref.ref, ...installed, cached: false };
    } finally {
      if (options.onProgress) flight.listeners.delete(options.onProgress);
    }
  }

  /** Every installed file of both folders, hashed where Kiln has no record of it yet. */
  async list(): Promise<InstalledFile[]> {
    const { whisperDir, modelsDir, catalog } = this.options;
    const files: InstalledFile[] = [];
    for (const dir of [...new Set([whisperDir, modelsDir])]) {
      const names = await readdir(dir).catch(() => [] as string[]);
      const records = await readRecords(dir);
      for (const name of names.sort()) {
        if (name.startsWith(".")) continue;
        const record = await recordOf(dir, name);
        if (!record) continue; // a folder, or gone meanwhile
        const whisper = dir === whisperDir ? catalog.models.filter((m) => m.file === name).map((m) => m.name) : [];
        const kind = whisper.length > 0 || /^ggml-.*\.bin$/.test(name) ? "whisper" : name.toLowerCase().endsWith(".gguf") ? "gguf" : "other";
        const ids = [...whisper, ...(records[name]?.refs ?? []).filter((r) => !r.startsWith("whisper:"))];
        files.push({ kind, path: join(dir, name), size: record.size, sha256: record.sha256, ids });
      }
    }
    return files;
  }

  /** Deletes what a reference (or a file name in either folder) names, with its record and any partial download. Returns the paths removed. */
  async remove(text: string): Promise<string[]> {
    const target = text.includes(":") ? await this.place(parseRef(text), false) : this.byName(text);
    if (target.file === undefined) throw new PullError("not_found", `${text} is not installed`);
    const { dir, file } = target;
    if (this.flights.has(join(dir, file))) throw new PullError("not_supported", `${text} is downloading now; remove it once that ends`);
    const removed: string[] = [];
    for (const path of [join(dir, file), join(dir, PARTIAL_DIR, file), join(dir, PARTIAL_DIR, `${file}.ipull`)]) {
      if (
        await stat(path).then(
          () => true,
          () => false,
        )
      ) {
        await rm(path, { force: true });
        removed.push(path);
      }
    }
    await updateRecord(dir, file, () => undefined);
    if (removed.length === 0) throw new PullError("not_found", `${text} is not installed`);
    return removed;
  }

  /** Stops every download (each keeps its part, to resume at the next pull). */
  close(): void {
    this.stop.abort(new PullError("hub_unreachable", "the download was stopped: Kiln is shutting down; it resumes at the next pull"));
  }

  private dirOf(ref: ModelRef): string {
    return ref.kind === "whisper" ? this.options.whisperDir : this.options.modelsDir;
  }

  /** A bare file name in one of the folders (`kiln models rm ggml-small.bin`). */
  private byName(name: string): { dir: string; file?: string } {
    if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(name) || name === RECORD_FILE) throw new PullError("bad_ref", `"${name}" is neither a model reference nor a file name`);
    const dir = name.toLowerCase().endsWith(".gguf") ? this.options.modelsDir : this.options.whisperDir;
    return { dir, file: name };
  }

  /** The folder and file a reference installs to; for a `:quant` tag, the file a previous pull recorded (or, with `resolve`, the hub's manifest names). */
  private async place(ref: ModelRef, resolve: boolean, signal?: AbortSignal): Promise<{ dir: string; file?: string; path?: string }> {
    const dir = this.dirOf(ref);
    switch (ref.kind) {
      case "whisper": {
        const model = this.options.catalog.get(ref.name);
        if (!model)
          throw new PullError("not_found", `whisper:${ref.name} is not in the whisper catalog (${this.options.catalog.names.join(", ")}); --whisper-catalog adds entries`);
        return { dir, file: model.file };
      }
      case "gguf":
        return { dir, file: ggufFileName(ref) };
      case "gguf-quant": {
        const records = await readRecords(dir);
        const file = Object.entries(records).find(([, r]) => r.refs.includes(ref.ref))?.[0];
        if (file || !resolve) return { dir, ...(file ? { file } : {}) };
        const path = await resolveQuant(this.options.source, ref.org, ref.repo, ref.quant, `${ref.ref} could not be resolved at ${this.hub}`, signal);
        return { dir, file: ggufFileName({ kind: "gguf", ref: ref.ref, org: ref.org, repo: ref.repo, path, revision: "main" }), path };
      }
    }
  }

  /** What to download for a reference. */
  private async download(ref: ModelRef, signal?: AbortSignal): Promise<FileDownload> {
    const { source, catalog } = this.options;
    if (ref.kind === "whisper") {
      const model = catalog.get(ref.name)!;
      return {
        ref: ref.ref,
        url: resolveUrl(source, model.repo, model.revision ?? "main", model.file),
        dir: this.dirOf(ref),
        file: model.file,
        sha256: model.sha256,
        sizeBytes: model.sizeBytes,
      };
    }
    if (ref.kind === "gguf") return { ref: ref.ref, url: resolveUrl(source, `${ref.org}/${ref.repo}`, ref.revision, ref.path), dir: this.dirOf(ref), file: ggufFileName(ref) };
    const { dir, file, path } = await this.place(ref, true, signal);
    return { ref: ref.ref, url: resolveUrl(source, `${ref.org}/${ref.repo}`, "main", path!), dir, file: file! };
  }
}

/** The promise's outcome, or the signal's reason once it aborts (the promise goes on). */
function waitFor<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * The models of one machine: its whisper folder and its GGUF folder, filled from a model hub.
 * `pull` turns a reference (refs.ts) into a checked file (download.ts). Pulls of the same file
 * share one download, each caller told its progress; a download whose every caller stopped
 * waiting is stopped (its part kept to resume). Downloads run one at a time, so each one's disk
 * check sees what the others took. `cached` answers without the network, `list` says what is
 * installed and `remove` deletes it.
 */
import { readdir, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { untilAborted } from "../core/abort.js";
import { nonEmptyFile } from "../core/disk.js";
import { Semaphore } from "../core/semaphore.js";
import { SPEECH_MODELS, type SpeechCatalogModel } from "../models/speech.js";
import { whisperFiles, type WhisperCatalog } from "../models/whisper.js";
import { PullError } from "./errors.js";
import { downloadFiles, PARTIAL_DIR, type FileDownload, type Installed, type PullProgress } from "./download.js";
import { readRecords, recordOf, RECORD_FILE, updateRecord } from "./installed.js";
import { ggufFileNames, ggufHubPaths, parseRef, setOf, splitOf, type ModelRef } from "./refs.js";
import { hubLabel, resolveQuant, resolveUrl, type HubSource } from "./remote.js";

export interface ModelHubOptions {
  /** The hub (`--hub-url`, default https://huggingface.co) and its token (`HF_TOKEN`). */
  source: HubSource;
  /** `--whisper-dir`: where whisper files go. */
  whisperDir: string;
  /** `--models-dir`: where GGUF files go. */
  modelsDir: string;
  /** The whisper models `whisper:<name>` may name, and their files and checksums. */
  catalog: WhisperCatalog;
  /** The speech models `speech:<name>` may name (voice activity, diarization). Default: the built-in ones (models/speech.ts). */
  speechModels?: readonly SpeechCatalogModel[];
  /** Free bytes every download leaves on the disk. Default 512 MiB. */
  reserveBytes?: number;
  /** A transfer that adds no byte for this long is stopped. Default 60. */
  stallSeconds?: number;
}

export interface PullOptions {
  /** Told how the download goes (many times a second). Default: nobody. */
  onProgress?: (progress: PullProgress) => void;
  /** Stops this caller's wait; the download goes on while another caller waits for it, else it stops (its part kept). */
  signal?: AbortSignal;
  /** Draws a progress bar on the terminal (`kiln models pull` on a TTY). Default false. */
  progressBar?: boolean;
}

/** A pulled (or already installed) file; of a split GGUF, its first part (the path a model is loaded from), with every part in `parts`. */
export interface Pulled extends Installed {
  /** The reference, canonical (`hf:org/repo:Q4_K_M`; a split GGUF's part by its first part). */
  ref: string;
  /** Whether it was there already (nothing was fetched). */
  cached: boolean;
  /** A split GGUF's parts, first part first, each with its sha256 and size; absent for a single file. */
  parts?: Installed[];
}

/** An installed file as `kiln models list` shows it. */
export interface InstalledFile {
  /** `partial`: a download that stopped before it was whole (the next pull resumes it; `kiln models rm <file>` removes it). */
  kind: "whisper" | "speech" | "gguf" | "other" | "partial";
  path: string;
  /** Bytes (of a partial download: on disk so far). */
  size: number;
  /** Its sha256; null for a partial download. */
  sha256: string | null;
  /** The names it serves: whisper catalog names, speech model references, the references pulled into it (each part of a split GGUF: the set's). */
  ids: string[];
  /** For a whisper or speech catalog file: whether its sha256 is the catalog's (a file copied in by hand may not be); null otherwise. */
  verified: boolean | null;
}

interface Flight {
  /** The reference that started it (the download records it). */
  ref: string;
  /** The files, in order (one, or a split GGUF's parts). */
  promise: Promise<Installed[]>;
  listeners: Set<(p: PullProgress) => void>;
  progress?: PullProgress;
  /** Callers waiting that may stop waiting; the flight stops when the last of them does. */
  waiters: number;
  /** A caller that cannot stop waiting (no signal) holds it to the end. */
  held: boolean;
  stop: AbortController;
}

const NOT_STARTED: PullProgress = { downloadedBytes: 0, totalBytes: 0, bytesPerSecond: 0, etaSeconds: Infinity };

export class ModelHub {
  private readonly flights = new Map<string, Flight>();
  private readonly stop = new AbortController();
  private readonly turns = new Semaphore(1);

  constructor(private readonly options: ModelHubOptions) {}

  /** The hub, as messages name it. */
  get hub(): string {
    return hubLabel(this.options.source);
  }

  /** The installed file a reference names (a split GGUF's first part, once every part is there), without asking the hub; undefined when not installed. */
  async cached(text: string): Promise<string | undefined> {
    const { dir, choices } = await this.place(parseRef(text));
    for (const files of choices) if (await allThere(dir, files)) return join(dir, files[0]!);
    return undefined;
  }

  /** The download under way (or waiting its turn) for a reference, if any. */
  async progress(text: string): Promise<PullProgress | undefined> {
    const { dir, choices } = await this.place(parseRef(text));
    const flight = choices.length ? this.flights.get(join(dir, choices[0]![0]!)) : undefined;
    return flight && (flight.progress ?? NOT_STARTED);
  }

  /** Installs what the reference names (a file already there is not fetched again) and returns it. */
  async pull(text: string, options: PullOptions = {}): Promise<Pulled> {
    const ref = parseRef(text);
    const installed = await this.cached(ref.ref);
    if (installed) return { ref: ref.ref, ...(await this.describe(installed, ref.ref)), cached: true };
    const files = await this.download(ref, options.signal);
    const dir = files[0]!.dir;
    const names = files.map((f) => f.file);
    const addRef = (r: string) =>
      Promise.all(names.map((file) => updateRecord(dir, file, (now) => now && { ...now, refs: [...new Set([...now.refs, r])] }).catch(() => undefined)));
    if (ref.kind === "gguf-quant" && (await allThere(dir, names))) {
      // what the tag names is installed already (pulled by its path): recorded under the tag too
      const there = await this.describe(join(dir, names[0]!), ref.ref);
      await addRef(ref.ref);
      return { ref: ref.ref, ...there, cached: true };
    }
    // one download per file (or set), whichever references ask for it (`whisper:large` and `whisper:large-v3` share one)
    const key = join(dir, names[0]!);
    const flight = this.flights.get(key) ?? this.launch(key, files, options.progressBar === true);
    if (options.onProgress) flight.listeners.add(options.onProgress);
    if (options.signal) flight.waiters++;
    else flight.held = true;
    try {
      const done = await untilAborted(flight.promise, options.signal);
      // every reference that asked for it is recorded, the first caller's (by the download) and the others'
      if (ref.ref !== flight.ref) await addRef(ref.ref);
      return { ref: ref.ref, ...done[0]!, ...(done.length > 1 ? { parts: done } : {}), cached: false };
    } finally {
      if (options.onProgress) flight.listeners.delete(options.onProgress);
      if (options.signal && --flight.waiters === 0 && !flight.held) {
        flight.stop.abort(new PullError("hub_unreachable", "every job waiting for it stopped; it resumes at the next pull"));
        // gone at once: a pull that comes while it winds down starts a download of its own
        if (this.flights.get(key) === flight) this.flights.delete(key);
      }
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
        const record = await recordOf(dir, name, records);
        if (!record) continue; // a folder, or gone meanwhile
        const models = dir === whisperDir ? catalog.models.filter((m) => whisperFiles(m).includes(name)) : [];
        const speech = dir === whisperDir ? this.speechModels.filter((m) => m.file === name) : [];
        const kind = models.length > 0 || /^ggml-.*\.bin$/.test(name) ? "whisper" : speech.length > 0 ? "speech" : name.toLowerCase().endsWith(".gguf") ? "gguf" : "other";
        const ids = [
          ...models.map((m) => m.name),
          ...speech.map((m) => `speech:${m.name}`),
          ...(records[name]?.refs ?? []).filter((r) => !r.startsWith("whisper:") && !r.startsWith("speech:")),
        ];
        const pinned = [...models, ...speech];
        const verified = pinned.length > 0 ? pinned.every((m) => m.sha256 === record.sha256) : null;
        files.push({ kind, path: join(dir, name), size: record.size, sha256: record.sha256, ids, verified });
      }
      // downloads that stopped short: shown, so that they can be resumed or removed
      // (and the parts of a split GGUF fetched and checked, waiting there for the others)
      for (const part of (await readdir(join(dir, PARTIAL_DIR)).catch(() => [] as string[])).sort()) {
        if (!part.endsWith(".ipull") && !splitOf(part)) continue;
        const s = await stat(join(dir, PARTIAL_DIR, part)).catch(() => undefined);
        if (s?.isFile()) files.push({ kind: "partial", path: join(dir, PARTIAL_DIR, part), size: s.blocks * 512, sha256: null, ids: [], verified: null });
      }
    }
    return files;
  }

  /** Deletes what a reference (or a file name in either folder) names, with its record and any partial download (a split GGUF: every part). Returns the paths removed. */
  async remove(text: string): Promise<string[]> {
    const { dir, choices } = text.includes(":") ? await this.place(parseRef(text)) : this.byName(text);
    const removed: string[] = [];
    for (const file of choices.flat()) {
      if (this.flights.has(join(dir, file))) throw new PullError("busy", `${text} is downloading now; remove it once that ends`);
    }
    for (const file of choices.flat()) {
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
      if (splitOf(file)) await updateRecord(dir, `${PARTIAL_DIR}/${file}`, () => undefined);
    }
    if (removed.length === 0) throw new PullError("not_found", `${text} is not installed`);
    return removed;
  }

  /** Whether `close` was called: a download that failed since was stopped, not refused. */
  get closed(): boolean {
    return this.stop.signal.aborted;
  }

  /** Stops every download (each keeps its part, to resume at the next pull). */
  close(): void {
    this.stop.abort(new PullError("hub_unreachable", "the download was stopped: Kiln is shutting down; it resumes at the next pull"));
  }

  private launch(key: string, files: FileDownload[], progressBar: boolean): Flight {
    const stop = new AbortController();
    const flight: Flight = { ref: files[0]!.ref, listeners: new Set(), waiters: 0, held: false, stop, promise: Promise.resolve([]) };
    const tell = (p: PullProgress) => {
      flight.progress = p;
      for (const l of flight.listeners) l(p);
    };
    flight.promise = (async () => {
      const signal = AbortSignal.any([this.stop.signal, stop.signal]);
      let release: (() => void) | undefined;
      try {
        release = await this.turns.acquire(signal); // one download at a time: each disk check sees what the others took
        return await downloadFiles(files, {
          hub: this.options.source,
          signal,
          onProgress: tell,
          ...(progressBar ? { progressBar: true } : {}),
          ...(this.options.reserveBytes !== undefined ? { reserveBytes: this.options.reserveBytes } : {}),
          ...(this.options.stallSeconds !== undefined ? { stallSeconds: this.options.stallSeconds } : {}),
        });
      } finally {
        release?.();
        if (this.flights.get(key) === flight) this.flights.delete(key);
      }
    })();
    flight.promise.catch(() => undefined); // its callers see the failure; none may be left
    this.flights.set(key, flight);
    return flight;
  }

  /** The installed file's sha256 and size (hashed once, then from its record); a split GGUF's first part's, with every part. */
  private async describe(path: string, ref: string): Promise<Installed & { parts?: Installed[] }> {
    const dir = dirname(path);
    const parts: Installed[] = [];
    for (const file of setOf(basename(path))) {
      const record = await recordOf(dir, file);
      if (!record) throw new PullError("not_found", `${ref} was removed while it was read`);
      parts.push({ path: join(dir, file), sha256: record.sha256, size: record.size });
    }
    return { ...parts[0]!, ...(parts.length > 1 ? { parts } : {}) };
  }

  private dirOf(ref: ModelRef): string {
    return ref.kind === "whisper" || ref.kind === "speech" ? this.options.whisperDir : this.options.modelsDir;
  }

  /** A bare file name in one of the folders (`kiln models rm ggml-small.bin`; a part of a split GGUF: the whole set), or a partial download's as `list` shows it (`….gguf.ipull`). */
  private byName(name: string): { dir: string; choices: string[][] } {
    if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(name) || name === RECORD_FILE) throw new PullError("bad_ref", `"${name}" is neither a model reference nor a file name`);
    const file = name.replace(/\.ipull$/, "");
    const dir = file.toLowerCase().endsWith(".gguf") ? this.options.modelsDir : this.options.whisperDir;
    return { dir, choices: [splitOf(file) ? setOf(file) : [file]] };
  }

  /**
   * The folder and the files a reference may be installed as, without the network (a `:quant` tag: the
   * files a pull recorded, if still there): each choice is one way it may be installed (whisper's older
   * file names), every file of a choice needed (a split GGUF's parts, first part first).
   */
  private async place(ref: ModelRef): Promise<{ dir: string; choices: string[][] }> {
    const dir = this.dirOf(ref);
    switch (ref.kind) {
      case "whisper":
        return { dir, choices: whisperFiles(this.whisperModel(ref.name)).map((f) => [f]) };
      case "speech":
        return { dir, choices: [[this.speechModel(ref.name).file]] };
      case "gguf":
        return { dir, choices: [ggufFileNames(ref)] };
      case "gguf-quant": {
        const recorded = Object.entries(await readRecords(dir)).find(([file, r]) => !file.startsWith(".") && r.refs.includes(ref.ref))?.[0];
        return { dir, choices: recorded ? [setOf(recorded)] : [] };
      }
    }
  }

  private whisperModel(name: string) {
    const model = this.options.catalog.get(name);
    if (!model) throw new PullError("not_found", `whisper:${name} is not in the whisper catalog (${this.options.catalog.names.join(", ")}); --whisper-catalog adds entries`);
    return model;
  }

  private get speechModels(): readonly SpeechCatalogModel[] {
    return this.options.speechModels ?? SPEECH_MODELS;
  }

  private speechModel(name: string): SpeechCatalogModel {
    const model = this.speechModels.find((m) => m.name === name);
    if (!model) throw new PullError("not_found", `speech:${name} is not a speech model Kiln knows (${this.speechModels.map((m) => m.name).join(", ")})`);
    return model;
  }

  /** The file a `:quant` tag names, as the hub's manifest says (a part of a split GGUF: the set, by its first part). */
  private async resolveTag(ref: Extract<ModelRef, { kind: "gguf-quant" }>, signal?: AbortSignal): Promise<Extract<ModelRef, { kind: "gguf" }>> {
    const path = await resolveQuant(this.options.source, ref.org, ref.repo, ref.quant, signal).catch((err: unknown) => {
      throw err instanceof PullError ? new PullError(err.code, `${ref.ref} could not be resolved at ${this.hub}: ${err.message}`) : err;
    });
    let named: ModelRef;
    try {
      named = parseRef(`hf:${ref.org}/${ref.repo}/${path}`);
    } catch (err) {
      throw new PullError("hub_unreachable", `${ref.ref} could not be resolved at ${this.hub}: the manifest names ${path}, ${(err as Error).message}`);
    }
    return { ...(named as Extract<ModelRef, { kind: "gguf" }>), ref: ref.ref };
  }

  /** What to download for a reference: one file, or every part of a split GGUF (first part first). */
  private async download(ref: ModelRef, signal?: AbortSignal): Promise<FileDownload[]> {
    const { source } = this.options;
    if (ref.kind === "whisper") {
      const model = this.whisperModel(ref.name);
      return [
        {
          ref: ref.ref,
          url: resolveUrl(source, model.repo, model.revision ?? "main", model.file),
          dir: this.dirOf(ref),
          file: model.file,
          sha256: model.sha256,
          sizeBytes: model.sizeBytes,
        },
      ];
    }
    if (ref.kind === "speech") {
      const model = this.speechModel(ref.name);
      return [
        {
          ref: ref.ref,
          url: resolveUrl(source, model.repo, model.revision, model.path),
          dir: this.dirOf(ref),
          file: model.file,
          sha256: model.sha256,
          sizeBytes: model.sizeBytes,
        },
      ];
    }
    const gguf = ref.kind === "gguf" ? ref : await this.resolveTag(ref, signal);
    const names = ggufFileNames(gguf);
    return ggufHubPaths(gguf).map((path, i) => ({
      ref: ref.ref,
      url: resolveUrl(source, `${gguf.org}/${gguf.repo}`, gguf.revision, path),
      dir: this.dirOf(ref),
      file: names[i]!,
    }));
  }
}

/** Whether every file is there (and not empty). */
async function allThere(dir: string, files: string[]): Promise<boolean> {
  for (const file of files) if (!(await nonEmptyFile(join(dir, file)))) return false;
  return files.length > 0;
}

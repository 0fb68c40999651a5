/**
 * `kiln models pull | list | rm`: whisper and GGUF files in the agent's folders, from the model hub
 * (hub/). `pull` draws a progress bar on a terminal and logs one JSON line a second otherwise.
 */
import { resolve } from "node:path";
import type { ModelsConfig } from "../config/index.js";
import { createLogger } from "../core/log.js";
import { logProgress, ModelHub, type InstalledFile } from "../hub/index.js";

function hubOf(config: ModelsConfig): ModelHub {
  return new ModelHub({
    source: { url: config.hubUrl, ...(config.hfToken ? { token: config.hfToken } : {}) },
    whisperDir: resolve(config.whisperDir),
    modelsDir: resolve(config.modelsDir),
    catalog: config.whisperCatalog,
  });
}

export async function pullModels(config: ModelsConfig, refs: string[]): Promise<void> {
  const hub = hubOf(config);
  const logger = createLogger("models", config.logLevel);
  const bar = Boolean(process.stdout.isTTY);
  for (const ref of refs) {
    if (bar) process.stdout.write(`pulling ${ref} from ${hub.hub}\n`);
    const pulled = await hub.pull(ref, bar ? { progressBar: true } : { onProgress: logProgress(logger, ref) });
    if (bar) process.stdout.write(`${pulled.cached ? "already installed" : "installed"}: ${pulled.path}\nsha256 ${pulled.sha256}\n`);
    else
      logger.info(
        { model: pulled.ref, path: pulled.path, sha256: pulled.sha256, size_bytes: pulled.size, cached: pulled.cached },
        pulled.cached ? "already installed" : "installed",
      );
  }
}

export async function listModels(config: ModelsConfig, json: boolean): Promise<void> {
  const files = await hubOf(config).list();
  // a file --serve names serves that id too
  const served = (f: InstalledFile) => config.serve.filter((s) => (s.ref ? f.ids.includes(s.ref) : resolve(s.path) === f.path)).map((s) => s.id);
  const rows = files.map((f) => ({ ...f, ids: [...new Set([...f.ids, ...served(f)])] }));
  if (json) {
    process.stdout.write(
      `${JSON.stringify(
        rows.map((r) => ({ kind: r.kind, path: r.path, size_bytes: r.size, sha256: r.sha256, ids: r.ids, verified: r.verified })),
        null,
        2,
      )}\n`,
    );
    return;
  }
  if (rows.length === 0) {
    process.stdout.write(`no models in ${resolve(config.whisperDir)} or ${resolve(config.modelsDir)}\n`);
    return;
  }
  // VERIFIED: a whisper file's sha256 against the catalog's ("no": copied in by hand from elsewhere)
  const check = (v: boolean | null) => (v === null ? "-" : v ? "yes" : "no");
  const table = [
    ["KIND", "SIZE", "SHA256", "VERIFIED", "IDS", "PATH"],
    ...rows.map((r) => [r.kind, `${(r.size / 1e6).toFixed(1)} MB`, r.sha256 ?? "-", check(r.verified), r.ids.join(",") || "-", r.path]),
  ];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  for (const row of table) process.stdout.write(`${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")}\n`);
}

export async function removeModels(config: ModelsConfig, targets: string[]): Promise<void> {
  const hub = hubOf(config);
  for (const target of targets) for (const path of await hub.remove(target)) process.stdout.write(`removed ${path}\n`);
}

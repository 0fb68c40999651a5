/**
 * The `filesystem` integration as an MCP server: files under `root_path` (with the allowed
 * extensions, up to `max_file_size`) as resources, and `list_files`, `read_file`, `search_files`
 * tools (`write_file` too unless read-only). No path can leave the root: `..`, absolute paths and
 * symbolic links pointing outside are refused after resolving the real path.
 */
import { readdir, readFile, realpath, stat, writeFile } from "node:fs/promises";
import { extname, isAbsolute, join, relative, sep } from "node:path";
import { pathToFileURL } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";

export interface FilesystemConfig {
  root_path: string;
  permissions?: { read_only?: boolean; allowed_extensions?: string[]; max_file_size?: number; max_results?: number };
  indexing?: { enable_search?: boolean };
}

class PathEscapeError extends Error {
  constructor(path: string) {
    super(`path "${path}" is outside root_path`);
    this.name = "PathEscapeError";
  }
}

const DEFAULT_MAX_RESULTS = 200;

/** Resolves `path` (relative to the root) to a real path inside the root, or throws. */
async function resolveInside(root: string, path: string, mustExist = true): Promise<string> {
  if (isAbsolute(path) || path.split(/[\\/]/).includes("..")) throw new PathEscapeError(path);
  const realRoot = await realpath(root);
  const candidate = join(realRoot, path);
  let real: string;
  try {
    real = await realpath(candidate);
  } catch (err) {
    if (mustExist) throw err;
    real = join(await realpath(join(candidate, "..")), candidate.split(sep).pop()!);
  }
  const rel = relative(realRoot, real);
  if (rel.startsWith("..") || isAbsolute(rel)) throw new PathEscapeError(path);
  return real;
}

async function walk(root: string, dir: string, out: string[], limit: number): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (out.length >= limit) return;
    const full = join(dir, entry.name);
    if (entry.isSymbolicLink()) {
      const real = await realpath(full).catch(() => "");
      if (!real || relative(root, real).startsWith("..")) continue; // links out of the root are invisible
      const s = await stat(real);
      if (s.isDirectory()) continue; // no following directory links (no cycles)
      out.push(relative(root, full));
    } else if (entry.isDirectory()) {
      await walk(root, full, out, limit);
    } else if (entry.isFile()) {
      out.push(relative(root, full));
    }
  }
}

export async function createFilesystemServer(config: FilesystemConfig): Promise<McpServer> {
  const root = await realpath(config.root_path);
  const p = config.permissions ?? {};
  const allowed = p.allowed_extensions?.map((e) => (e.startsWith(".") ? e : `.${e}`).toLowerCase());
  const maxSize = p.max_file_size ?? 10 * 1024 * 1024;
  const limit = p.max_results ?? DEFAULT_MAX_RESULTS;
  const permitted = (file: string) => !allowed || allowed.includes(extname(file).toLowerCase());
  const files = async () => {
    const all: string[] = [];
    await walk(root, root, all, limit * 10);
    return all.filter(permitted).slice(0, limit);
  };
  const readChecked = async (path: string) => {
    if (!permitted(path)) throw new Error(`"${path}": extension not in allowed_extensions`);
    const real = await resolveInside(root, path);
    const s = await stat(real);
    if (s.size > maxSize) throw new Error(`"${path}": ${s.size} bytes, over max_file_size ${maxSize}`);
    return readFile(real, "utf8");
  };
  const text = (t: string) => ({ content: [{ type: "text" as const, text: t }] });
  const failure = (err: unknown) => ({ isError: true, content: [{ type: "text" as const, text: err instanceof Error ? err.message : String(err) }] });

  const server = new McpServer({ name: "kiln-filesystem", version: "1.0.0" });
  for (const file of await files()) {
    server.registerResource(file, pathToFileURL(join(root, file)).href, { mimeType: "text/plain", description: `${file} under ${root}` }, async (uri) => ({
      contents: [{ uri: uri.href, mimeType: "text/plain", text: await readChecked(file) }],
    }));
  }
  server.registerTool("list_files", { description: "List files under the root (relative paths)" }, async () => text((await files()).join("\n")));
  server.registerTool("read_file", { description: "Read a text file under the root", inputSchema: { path: z.string() } }, async ({ path }) => {
    try { return text(await readChecked(path)); } catch (err) { return failure(err); }
  });
  if (config.indexing?.enable_search !== false) {
    server.registerTool("search_files", { description: "Find files whose name or content contains a string", inputSchema: { query: z.string().min(1) } }, async ({ query }) => {
      const hits: string[] = [];
      for (const f of await files()) {
        if (f.includes(query) || (await readChecked(f).catch(() => "")).includes(query)) hits.push(f);
      }
      return text(hits.join("\n"));
    });
  }
  if (!p.read_only) {
    server.registerTool("write_file", { description: "Write a text file under the root", inputSchema: { path: z.string(), content: z.string() } }, async ({ path, content }) => {
      try {
        if (!permitted(path)) throw new Error(`"${path}": extension not in allowed_extensions`);
        if (Buffer.byteLength(content) > maxSize) throw new Error(`content is over max_file_size ${maxSize}`);
        await writeFile(await resolveInside(root, path, false), content);
        return text(`wrote ${path}`);
      } catch (err) { return failure(err); }
    });
  }
  return server;
}

/**
 * The `filesystem` integration as an MCP server over one tenant's folder: files under
 * `base/<account>/<root_path>` (with the allowed extensions, up to `max_file_size`) as resources,
 * and `list_files`, `read_file`, `search_files` tools (`write_file` too unless read-only).
 *
 * `base` is the operator's folder; `account` is the configuration's owner and `root_path` a path
 * relative to the account's folder ("" or "." for the folder itself). Nothing can leave the root:
 * `..` segments, absolute paths and NUL bytes are refused, and so is every symbolic link: in the
 * account folder and root_path (checked with lstat and realpath), on the way to a file (its
 * folder's real path must be its lexical path), and as the file itself (opened with O_NOFOLLOW).
 * What was opened is checked again (fstat: a regular file with one link; its path through
 * /proc/self/fd, where there is one, is the one asked for), and a write creates the file without
 * O_TRUNC and only truncates it once checked, so a link cannot make it create, clobber or read
 * anything outside. Symbolic links are invisible in listings.
 */
import { existsSync } from "node:fs";
import { constants, lstat, mkdir, open, readdir, readlink, realpath, type FileHandle } from "node:fs/promises";
import { extname, isAbsolute, join, relative, sep } from "node:path";
import { isValidAccountName } from "../auth/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { KilnError } from "../../core/errors.js";

export interface FilesystemConfig {
  /** Relative to the account's folder; "" or "." is the folder itself. */
  root_path: string;
  permissions?: { read_only?: boolean; allowed_extensions?: string[]; max_file_size?: number; max_results?: number };
  indexing?: { enable_search?: boolean };
}

/** Where a tenant's folders live: the operator's `base` folder and the configuration's account. */
export interface FilesystemLocation {
  base: string;
  account: string;
}

/** A path (or account, or root_path) that would leave the account's root; a tool error, not an HTTP one. */
export class PathEscapeError extends KilnError {
  constructor(what: string, why = "is outside the root") {
    super("path_escape", `${what} ${why}`);
  }
}

const DEFAULT_MAX_RESULTS = 200;
const PROC_FD = process.platform === "linux" && existsSync("/proc/self/fd") ? "/proc/self/fd" : undefined;
const { O_RDONLY, O_WRONLY, O_CREAT, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = constants;

const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code;
const inside = (root: string, real: string) => real === root || real.startsWith(root.endsWith(sep) ? root : root + sep);

/**
 * The segments of a relative path, or a PathEscapeError: no NUL byte, not absolute, no `..`.
 * "" and "." segments are dropped (so "" and "." are the root itself).
 */
function segments(path: unknown, what: string): string[] {
  if (typeof path !== "string") throw new PathEscapeError(what, "is not a string");
  if (path.includes("\0")) throw new PathEscapeError(what, "holds a NUL byte");
  if (isAbsolute(path) || path.startsWith("\\") || /^[A-Za-z]:/.test(path)) throw new PathEscapeError(what, "is absolute; it must be relative to the root");
  const parts = path.split(/[\\/]/).filter((s) => s !== "" && s !== ".");
  if (parts.includes("..")) throw new PathEscapeError(what, "has a .. segment");
  return parts;
}

/**
 * The real path of `base/<account>/<root_path>`: the account folder is created (0700) when
 * missing; neither it nor any folder of root_path may be a symbolic link, and the root must exist.
 */
export async function resolveFilesystemRoot(rootPath: string, { base, account }: FilesystemLocation): Promise<string> {
  if (!isValidAccountName(account)) throw new PathEscapeError(`account ${JSON.stringify(String(account))}`, "is not a plain folder name");
  const parts = segments(rootPath ?? "", `root_path ${JSON.stringify(rootPath)}`);
  await mkdir(base, { recursive: true, mode: 0o700 });
  const realBase = await realpath(base);
  const accountDir = join(realBase, account);
  await mkdir(accountDir, { mode: 0o700 }).catch((err) => {
    if (errno(err) !== "EEXIST") throw err;
  });
  const a = await lstat(accountDir);
  if (a.isSymbolicLink() || !a.isDirectory() || (await realpath(accountDir)) !== accountDir) {
    throw new PathEscapeError(`the folder of account ${account}`, "is not a plain folder");
  }
  let dir = accountDir;
  for (const part of parts) {
    dir = join(dir, part);
    const s = await lstat(dir).catch((err) => {
      if (errno(err) === "ENOENT") throw new Error(`root_path ${JSON.stringify(rootPath)}: no such folder in the account's folder`);
      throw err;
    });
    if (s.isSymbolicLink()) throw new PathEscapeError(`root_path ${JSON.stringify(rootPath)}`, "goes through a symbolic link");
    if (!s.isDirectory()) throw new Error(`root_path ${JSON.stringify(rootPath)}: not a folder`);
  }
  const real = await realpath(dir);
  if (real !== dir || !inside(accountDir, real)) throw new PathEscapeError(`root_path ${JSON.stringify(rootPath)}`, "is outside the account's folder");
  return real;
}

/** A tenant-facing message for a failed file operation (never the server's absolute paths). */
function toolError(path: string, err: unknown): Error {
  if (err instanceof PathEscapeError) return err;
  switch (errno(err)) {
    case "ENOENT":
    case "ENOTDIR":
      return new Error(`"${path}": no such file`);
    case "ELOOP":
    case "EMLINK":
      return new PathEscapeError(`"${path}"`, "is a symbolic link");
    case "EISDIR":
      return new Error(`"${path}": is a folder`);
    case "EACCES":
    case "EPERM":
      return new Error(`"${path}": permission denied`);
    case "ENXIO":
    case "EAGAIN":
    case "EWOULDBLOCK":
      return new Error(`"${path}": not a regular file`);
  }
  return err instanceof Error && !errno(err) ? err : new Error(`"${path}": ${errno(err) ?? "failed"}`);
}

/** The path the kernel has for an open descriptor, where /proc tells it. */
async function descriptorPath(handle: FileHandle): Promise<string | undefined> {
  return PROC_FD ? readlink(`${PROC_FD}/${handle.fd}`) : undefined;
}

/**
 * Opens `path` (relative to the real `root`) for reading or for writing (created 0600 when
 * missing, not truncated): no symbolic link anywhere on the way, the opened thing a regular file
 * with a single link, at the path asked for.
 */
async function openInside(root: string, path: string, mode: "read" | "write"): Promise<FileHandle> {
  const parts = segments(path, `"${path}"`);
  const name = parts.pop();
  if (!name) throw new Error(`"${path}": names the root folder, not a file`);
  const parent = join(root, ...parts);
  const expected = join(parent, name);
  const realParent = await realpath(parent);
  if (realParent !== parent || !inside(root, realParent)) throw new PathEscapeError(`"${path}"`, "goes through a symbolic link");
  // Open the folder itself, then the name within it through /proc/self/fd/N (as openat would):
  // a folder swapped for a link after the check above cannot redirect the open.
  let dir: FileHandle | undefined;
  let target = expected;
  if (PROC_FD) {
    dir = await open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if ((await descriptorPath(dir)) !== parent) {
      await dir.close();
      throw new PathEscapeError(`"${path}"`, "goes through a symbolic link");
    }
    target = `${PROC_FD}/${dir.fd}/${name}`;
  }
  try {
    const flags = (mode === "write" ? O_WRONLY | O_CREAT : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK;
    const handle = await open(target, flags, 0o600);
    try {
      const s = await handle.stat();
      if (!s.isFile()) throw new Error(`"${path}": not a regular file`);
      if (s.nlink > 1) throw new PathEscapeError(`"${path}"`, "has other hard links");
      const opened = await descriptorPath(handle);
      if (opened !== undefined && opened !== expected) throw new PathEscapeError(`"${path}"`);
      return handle;
    } catch (err) {
      await handle.close();
      throw err;
    }
  } finally {
    await dir?.close();
  }
}

/** Regular files under `dir` (relative to `root`); symbolic links are skipped, never followed. */
async function walk(root: string, dir: string, out: string[], limit: number): Promise<void> {
  if ((await realpath(dir).catch(() => "")) !== dir) return; // swapped for a link meanwhile
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (out.length >= limit) return;
    const full = join(dir, entry.name);
    if (entry.isDirectory()) await walk(root, full, out, limit);
    else if (entry.isFile()) out.push(relative(root, full));
  }
}

/**
 * An MCP server over `base/<account>/<config.root_path>` (see the module comment). Throws when
 * the account is not a plain folder name, root_path leaves the account's folder or goes through
 * a symbolic link (PathEscapeError), or the root does not exist.
 */
export async function createFilesystemServer(config: FilesystemConfig, location: FilesystemLocation): Promise<McpServer> {
  const root = await resolveFilesystemRoot(config.root_path, location);
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
    let handle: FileHandle;
    try {
      handle = await openInside(root, path, "read");
    } catch (err) {
      throw toolError(path, err);
    }
    try {
      const { size } = await handle.stat();
      if (size > maxSize) throw new Error(`"${path}": ${size} bytes, over max_file_size ${maxSize}`);
      const body = await handle.readFile();
      if (body.length > maxSize) throw new Error(`"${path}": over max_file_size ${maxSize}`);
      return body.toString("utf8");
    } finally {
      await handle.close();
    }
  };
  const writeChecked = async (path: string, content: string) => {
    if (!permitted(path)) throw new Error(`"${path}": extension not in allowed_extensions`);
    const body = Buffer.from(content, "utf8");
    if (body.length > maxSize) throw new Error(`content is over max_file_size ${maxSize}`);
    let handle: FileHandle;
    try {
      handle = await openInside(root, path, "write");
    } catch (err) {
      throw toolError(path, err);
    }
    try {
      await handle.truncate(0);
      let written = 0;
      while (written < body.length) written += (await handle.write(body, written, body.length - written, written)).bytesWritten;
    } finally {
      await handle.close();
    }
  };
  const text = (t: string) => ({ content: [{ type: "text" as const, text: t }] });
  const failure = (err: unknown) => ({ isError: true, content: [{ type: "text" as const, text: err instanceof Error ? err.message : String(err) }] });

  const server = new McpServer({ name: "kiln-filesystem", version: "1.0.0" });
  for (const file of await files()) {
    // The URI names the file under the root, never the scheduler's own folders.
    server.registerResource(
      file,
      `kiln-fs:///${file.split(sep).map(encodeURIComponent).join("/")}`,
      { mimeType: "text/plain", description: `${file} under root_path` },
      async (uri) => ({
        contents: [{ uri: uri.href, mimeType: "text/plain", text: await readChecked(file) }],
      }),
    );
  }
  server.registerTool("list_files", { description: "List files under the root (relative paths)" }, async () => text((await files()).join("\n")));
  server.registerTool("read_file", { description: "Read a text file under the root", inputSchema: { path: z.string() } }, async ({ path }) => {
    try {
      return text(await readChecked(path));
    } catch (err) {
      return failure(err);
    }
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
        await writeChecked(path, content);
        return text(`wrote ${path}`);
      } catch (err) {
        return failure(err);
      }
    });
  }
  return server;
}

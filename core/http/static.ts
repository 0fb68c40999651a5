import { readFile } from "node:fs/promises";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".svg": "image/svg+xml",
};

/**
 * Serves the listed files of a folder (the web UI's and the dashboard's: no build step, no CDN),
 * read at each request so an edit shows on reload; anything not listed is `undefined` (a 404).
 */
export function staticFiles(dir: URL, files: readonly string[]): (name: string) => Promise<Response> | undefined {
  return (name) => {
    if (!files.includes(name)) return undefined;
    return readFile(fileURLToPath(new URL(name, dir))).then(
      (body) =>
        new Response(body, {
          headers: { "Content-Type": TYPES[extname(name)] ?? "application/octet-stream", "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff" },
        }),
    );
  };
}

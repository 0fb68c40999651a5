/**
 * The agent's web UI on port 7860: a static page (HTML, CSS, plain JS; no build step, no CDN)
 * served beside `/api/*`, which it uses as any other client does.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Hono } from "hono";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".svg": "image/svg+xml",
};
const ASSETS = ["index.html", "app.css", "app.js", "favicon.svg"];

/** The static folder: beside this module in the sources, or back in the sources from dist/. */
function staticDir(): string {
  const beside = fileURLToPath(new URL("./static/", import.meta.url));
  return existsSync(beside) ? beside : fileURLToPath(new URL("../../../agent/ui/static/", import.meta.url));
}

export function uiRoutes(): Hono {
  const dir = staticDir();
  const app = new Hono();
  const serve = async (name: string) => new Response(await readFile(join(dir, name)), {
    headers: { "Content-Type": TYPES[extname(name)] ?? "application/octet-stream", "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff" },
  });
  app.get("/", () => serve("index.html"));
  app.get("/ui/:name", (c) => {
    const name = c.req.param("name");
    return ASSETS.includes(name) ? serve(name) : c.notFound();
  });
  return app;
}

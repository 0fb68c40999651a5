/**
 * The agent's web UI on port 7860: a static page (HTML, CSS, plain JS; no build step, no CDN)
 * served beside `/api/*`, which it uses as any other client does.
 */
import { Hono } from "hono";
import { staticFiles } from "../../core/http/index.js";
import { existingOr } from "../../core/paths.js";

/** The static folder: beside this module in the sources, or back in the sources from dist/. */
const STATIC = existingOr(new URL("./static/", import.meta.url), new URL("../../../agent/ui/static/", import.meta.url));

export function uiRoutes(): Hono {
  const serve = staticFiles(STATIC, ["index.html", "app.css", "app.js", "favicon.svg"]);
  const app = new Hono();
  app.get("/", () => serve("index.html")!);
  app.get("/ui/:name", (c) => serve(c.req.param("name")) ?? c.notFound());
  return app;
}

/**
 * Prometheus metrics (prom-client). Each server keeps its own registry (scheduler and agent can
 * share a process in `kiln dev`), with the process's default metrics, an HTTP request counter and
 * latency histogram by route, and whatever the component adds. Served as text on `/metrics`.
 */
import type { MiddlewareHandler } from "hono";
import { collectDefaultMetrics, Counter, Histogram, Registry } from "prom-client";

export { Counter, Gauge, Histogram, Registry } from "prom-client";

export interface HttpMetrics {
  registry: Registry;
  /** Counts and times every request by method, route pattern and status. */
  middleware: MiddlewareHandler;
  /** `GET /metrics` in the Prometheus text format. */
  handler: () => Promise<Response>;
}

/** A registry with default process metrics and HTTP metrics prefixed `kiln_<component>_`. */
export function createHttpMetrics(component: "scheduler" | "agent"): HttpMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ component });
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: `kiln_${component}_http_requests_total`,
    help: "HTTP requests by method, route and status",
    labelNames: ["method", "route", "status"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: `kiln_${component}_http_request_duration_seconds`,
    help: "Time to the response headers, by method and route",
    labelNames: ["method", "route"] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [registry],
  });
  return {
    registry,
    middleware: async (c, next) => {
      const started = performance.now();
      await next();
      const route = c.req.routePath === "/*" || !c.req.routePath ? "unmatched" : c.req.routePath;
      requests.inc({ method: c.req.method, route, status: String(c.res.status) });
      duration.observe({ method: c.req.method, route }, (performance.now() - started) / 1000);
    },
    handler: async () => new Response(await registry.metrics(), { headers: { "Content-Type": registry.contentType } }),
  };
}

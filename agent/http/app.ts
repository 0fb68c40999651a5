/**
 * The agent's HTTP app on port 7860 (Hono): the transcription API under `/api` —
 * `POST /api/process`, `GET /api/status/{job_id}`, `GET /api/result/{job_id}?format=`,
 * `GET /api/jobs`, `POST /api/jobs/{job_id}/cancel`, `DELETE /api/jobs/{job_id}`,
 * `GET /api/models` — behind the agent token and each job's handle (`./access.ts`).
 */
import type { HttpBindings } from "@hono/node-server";
import { Hono, type MiddlewareHandler } from "hono";
import { bearerToken, drain, notFound, onError, requestId, sseResponse, type RequestIdEnv } from "../../core/http/index.js";
import ipaddr from "ipaddr.js";
import { InFlightLimitError, InvalidRequestError, ApiError, PayloadTooLargeError, PermissionError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { HttpMetrics } from "../../core/metrics.js";
import { WHISPER_LANGUAGES } from "../../models/whisper.js";
import { CONTENT_TYPES, FORMATS, render, type OutputFormat } from "../../speech/formats.js";
import type { WhisperPool } from "../asr/whisper.js";
import { checkRunnable, MAX_PAGE, type JobEvent, type JobService, type NodeCapabilities } from "../jobs/index.js";
import { access, requireJob, requireOperator, type AccessVariables } from "./access.js";
import { uiRoutes } from "../ui/index.js";
import { parseJobFields } from "../../speech/fields.js";
import { parseUpload, type UploadLimits } from "./upload.js";

export interface AgentHttpDeps {
  jobs: JobService;
  whisper: WhisperPool;
  /** Throws 503 `engine_unavailable` when this node cannot transcribe at all (checkPipeline): asked before an upload is stored. */
  pipeline: () => Promise<void>;
  limits: UploadLimits;
  /** Uploads one client address may have in flight at once (more: 429). */
  maxClientUploads: number;
  /**
   * Answer only requests whose `Host` is a loopback name or address (an instance without a
   * token, on loopback: a web page cannot reach it through DNS rebinding). Default false.
   */
  loopbackHostsOnly?: boolean;
  /** What this node can do beyond transcription; requests needing more are refused at submission. */
  capabilities: NodeCapabilities;
  /** When set, every `/api/*` call needs `Authorization: Bearer <token>` (or, for a job's own routes, its handle). */
  token?: string;
  /** The node panel's facts (hardware, jobs, scheduler link). */
  node: () => Promise<NodeInfo>;
  metrics: HttpMetrics;
  /** Readiness checks (models loaded, scheduler link when configured). */
  ready: () => Promise<{ ready: boolean; checks: Record<string, boolean>; transcription: Record<string, boolean | string | string[]> }>;
  logger: Logger;
}

/** `GET /api/node`: what the web UI's node panel shows. */
export interface NodeInfo {
  node_id: string;
  compute: string;
  gpus: { model: string; memory_total_bytes: number }[];
  cpu: string;
  cpu_cores: number;
  memory_total_bytes: number;
  memory_free_bytes: number;
  jobs: { running: number; queued: number };
  /** `null` on a transcription-only instance. */
  /** The schedulers' addresses (comma-separated) and the links' state ("connected" when all are); null without --scheduler. */
  scheduler: { address: string; state: string } | null;
  /** Each scheduler's address and its link's state. */
  schedulers: { address: string; state: string }[];
  chat_models: string[];
  capabilities: { diarization: boolean; translation: boolean; max_upload_bytes: number; max_files: number };
}

export type AgentEnv = { Bindings: HttpBindings; Variables: RequestIdEnv["Variables"] & AccessVariables };

/** Routes about one job, which its handle opens. */
/** How often an events stream with nothing to say writes a comment, keeping its connection from the idle timeout. */
const EVENTS_PING_MS = 15_000;

const JOB_ROUTE = /^\/api\/(?:(?:status|result)\/[^/]+|jobs\/[^/]+(?:\/cancel|\/events)?)$/;

export function createAgentApp(deps: AgentHttpDeps): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  app.onError(onError(deps.logger));
  app.notFound(notFound);
  app.use("*", requestId());
  app.use("*", deps.metrics.middleware);
  // Operations endpoints, outside /api: /healthz stays open for supervisors; /readyz and /metrics (the
  // models, jobs and links they tell) need the agent token when one is set, as Prometheus and probes can send it.
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  if (deps.token !== undefined) {
    const operatorOnly = bearerToken(deps.token, {
      missing: ["missing_api_key", 'Authorization: this instance needs "Bearer <token>" (its --agent-token)'],
      invalid: ["invalid_api_key", "Authorization: the bearer token is not this instance's"],
    });
    app.use("/readyz", operatorOnly);
    app.use("/metrics", operatorOnly);
  }
  app.get("/readyz", async (c) => {
    const r = await deps.ready();
    return c.json(r, r.ready ? 200 : 503);
  });
  app.get("/metrics", () => deps.metrics.handler());
  if (deps.loopbackHostsOnly) app.use("*", loopbackHostsOnly());
  app.use(
    "/api/*",
    access(deps.token, (path) => JOB_ROUTE.test(path)),
  );

  /** The most a request may declare: every file at the size limit, plus room for the form's framing and fields. */
  const largestRequest = deps.limits.files * deps.limits.fileBytes + 8 * 1024 ** 2;
  const uploading = new Map<string, number>(); // client (address, or IPv6 /64) → uploads in flight
  app.post("/api/process", async (c) => {
    const client = clientKey(c.env.incoming.socket.remoteAddress);
    const mine = uploading.get(client) ?? 0;
    if (mine >= deps.maxClientUploads) {
      await drain(c.env.incoming);
      throw new InFlightLimitError(`audio: this address already has ${mine} uploads in progress (at most ${deps.maxClientUploads}); wait for one to finish`);
    }
    uploading.set(client, mine + 1);
    let upload;
    let ticket;
    try {
      // an engine this node lacks refuses the upload before a byte of it is stored
      await deps.pipeline();
      deps.jobs.ensureRoom(1);
      const length = c.req.header("content-length");
      const declared = length && /^\d+$/.test(length) ? Number(length) : undefined;
      if (declared !== undefined && declared > largestRequest) {
        throw new PayloadTooLargeError("request_too_large", `Content-Length: ${declared} bytes is more than ${deps.limits.files} files of the largest size could take`);
      }
      ticket = await deps.jobs.admit(declared);
      const jobs = deps.jobs;
      const reserved = ticket;
      upload = await parseUpload(c.env.incoming, deps.limits, {
        stage: (fileName) => jobs.stage(fileName, reserved),
        charge: (file, bytes) => jobs.charge(file, bytes),
        discard: (files) => jobs.discard(files),
        // the fields so far: the model only when named (it may follow), the rest as they stand
        check: async (fields) => checkRunnable(parseJobFields(fields, deps.whisper.catalog), deps.whisper, deps.capabilities, { model: fields.model !== undefined }),
      });
    } catch (err) {
      if (!ticket) {
        // Refused before a byte was staged: the body is read and dropped first, the connection kept.
        await drain(c.env.incoming);
      } else if (err instanceof ApiError && (err.status === 413 || err.status === 507)) {
        // Refused mid-upload for its size: the rest is not worth reading; answer, then close the connection.
        // (Any other refusal reads and drops the rest in the background, bounded: a client still sending gets the answer.)
        c.header("Connection", "close");
      }
      throw err;
    } finally {
      if (ticket) deps.jobs.settle(ticket);
      const left = (uploading.get(client) ?? 1) - 1;
      if (left > 0) uploading.set(client, left);
      else uploading.delete(client);
    }
    try {
      const options = parseJobFields(upload.fields, deps.whisper.catalog);
      await checkRunnable(options, deps.whisper, deps.capabilities);
      const jobs = deps.jobs.submit(upload.files, options);
      const body =
        jobs.length === 1
          ? { job_id: jobs[0]!.job_id, status: jobs[0]!.status, handle: jobs[0]!.handle }
          : { jobs: jobs.map((j) => ({ job_id: j.job_id, status: j.status, file_name: j.file_name, handle: j.handle })) };
      return c.json(body, 202);
    } catch (err) {
      await deps.jobs.discard(upload.files);
      throw err;
    }
  });

  app.get("/api/jobs", (c) => {
    requireOperator(c, "listing jobs");
    const raw = c.req.query("limit") ?? "20";
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_PAGE) {
      throw new InvalidRequestError("invalid_limit", `limit: expected a whole number from 1 to ${MAX_PAGE}, got "${raw}"`);
    }
    return c.json(deps.jobs.list(Number(raw), c.req.query("after")));
  });

  app.post("/api/jobs/:id/cancel", async (c) => {
    const id = c.req.param("id");
    requireJob(c, deps.jobs, id);
    return c.json(await deps.jobs.cancel(id));
  });

  app.delete("/api/jobs/:id", async (c) => {
    const id = c.req.param("id");
    requireJob(c, deps.jobs, id);
    await deps.jobs.remove(id);
    return c.json({ job_id: id, deleted: true });
  });

  app.get("/api/status/:id", async (c) => {
    const id = c.req.param("id");
    requireJob(c, deps.jobs, id);
    const view = await deps.jobs.status(id);
    // `segments_after=N`: only the segments after id N, for a client that polls (the list grows with the job)
    const raw = c.req.query("segments_after");
    if (raw !== undefined) {
      if (!/^(-1|\d{1,9})$/.test(raw))
        throw new InvalidRequestError("invalid_segments_after", `segments_after: expected a segment id (a whole number, or -1), got "${raw.slice(0, 40)}"`);
      view.segments = view.segments.filter((s) => s.id > Number(raw));
    }
    return c.json(view);
  });

  // Server-sent events of one job: its progress, each segment as it is finished, then its end.
  app.get("/api/jobs/:id/events", async (c) => {
    const id = c.req.param("id");
    requireJob(c, deps.jobs, id);
    // a reconnecting EventSource sends the last segment id it saw: the replay starts after it
    const last = Number(c.req.header("last-event-id") ?? "-1");
    const after = Number.isInteger(last) && last >= -1 ? last : -1;
    const queue: JobEvent[] = [];
    let wake: (() => void) | undefined;
    // subscribed before the stream starts, so that a 404 or 429 is an HTTP error, not an event
    const unsubscribe = await deps.jobs.watch(
      id,
      (event) => {
        // only the latest progress waits: a slow reader never holds a backlog of them
        if (event.type === "progress" && queue.at(-1)?.type === "progress") queue[queue.length - 1] = event;
        else queue.push(event);
        wake?.();
      },
      after,
    );
    let open = true;
    const close = (): void => {
      open = false;
      unsubscribe();
      wake?.();
    };
    return sseResponse(
      c,
      async (send, drained) => {
        try {
          while (open) {
            const event = queue.shift();
            if (!event) {
              // a comment now and then: idle connections are closed after --http-idle (a queued job, a long chunk)
              const ping = await new Promise<boolean>((resolve) => {
                const timer = setTimeout(() => resolve(true), EVENTS_PING_MS);
                wake = () => {
                  clearTimeout(timer);
                  resolve(false);
                };
              });
              wake = undefined;
              if (ping) send(": ping\n\n");
              continue;
            }
            const data = JSON.stringify(event.type === "segment" ? event.segment : { ...event, type: undefined });
            // a reader that lags is waited for: meanwhile progress waits in the queue, only the latest
            if (!send(`event: ${event.type}\ndata: ${data}\n${event.type === "segment" ? `id: ${event.segment.id}\n` : ""}\n`)) await drained();
            if (event.type === "done") break;
          }
        } finally {
          unsubscribe();
        }
      },
      close,
    );
  });

  app.get("/api/result/:id", async (c) => {
    const format = (c.req.query("format") ?? "json").toLowerCase();
    if (!(FORMATS as readonly string[]).includes(format)) {
      throw new InvalidRequestError("invalid_format", `format: "${format}" is not one of ${FORMATS.join(", ")}`);
    }
    const id = c.req.param("id");
    requireJob(c, deps.jobs, id);
    const transcript = await deps.jobs.result(id);
    c.header("Content-Type", CONTENT_TYPES[format as OutputFormat]);
    if (c.req.query("download") !== undefined) c.header("Content-Disposition", `attachment; filename="${id}.${format}"`);
    return c.body(render(transcript, format as OutputFormat));
  });

  // `languages` (code → name) is beyond the spec's shape: the web UI's language choices.
  // `on_demand`: a model not installed may be picked (the job downloads it first)
  app.get("/api/models", async (c) => c.json({ models: await deps.whisper.status(), languages: WHISPER_LANGUAGES, on_demand: deps.whisper.fetches }));

  app.get("/api/node", async (c) => c.json(await deps.node()));

  app.route("/", uiRoutes());

  return app;
}

/**
 * Whom the per-client upload cap counts: the IPv4 address (an IPv4-mapped IPv6 one unwrapped), or
 * the /64 of an IPv6 address (one host usually holds a whole /64). Behind a reverse proxy every
 * client is the proxy: the cap is then the proxy's.
 */
export function clientKey(remote: string | undefined): string {
  if (!remote || !ipaddr.isValid(remote)) return remote ?? "unknown";
  const addr = ipaddr.process(remote);
  if (addr.kind() === "ipv4") return addr.toString();
  return `${(addr as ipaddr.IPv6).parts
    .slice(0, 4)
    .map((p) => p.toString(16))
    .join(":")}::/64`;
}

const LOOPBACK_HOST = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?$/i;

/** Refuses a request whose Host is not a loopback name or address (403 host_not_allowed). */
function loopbackHostsOnly(): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header("host") ?? "";
    if (!LOOPBACK_HOST.test(host)) {
      throw new PermissionError(
        "host_not_allowed",
        `Host: "${host.slice(0, 100)}" is not a loopback name; this instance has no --agent-token and answers only 127.0.0.1, [::1] and localhost`,
      );
    }
    await next();
  };
}

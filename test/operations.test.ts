/**
 * What operators rely on: /healthz and /readyz on both servers, the standard gRPC health service
 * on the scheduler, and Prometheus /metrics whose counters move with traffic.
 */
import http2 from "node:http2";
import { connect } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { afterEach, describe, expect, it } from "vitest";
import { FLEET_SERVICE } from "../scheduler/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, postChat, until, waitForAgents } from "./helpers/fleet.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Parses the Prometheus text format strictly enough to catch a malformed exposition. */
function parseMetrics(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* /.test(line)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (-?(?:\d+(?:\.\d+)?(?:e[+-]?\d+)?|NaN|\+Inf|-Inf))$/.exec(line);
    expect(m, `not a Prometheus sample: ${line}`).not.toBeNull();
    samples.set(m![1]!, Number(m![2]));
  }
  return samples;
}

const sum = (samples: Map<string, number>, prefix: string, filter = "") => [...samples].filter(([k]) => k.startsWith(prefix) && k.includes(filter)).reduce((a, [, v]) => a + v, 0);

function grpcHealth(port: number, name: string): Promise<string> {
  const Client = grpc.makeClientConstructor(healthService as unknown as grpc.ServiceDefinition, "Health");
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    check(req: { service: string }, cb: (err: grpc.ServiceError | null, res?: { status: string }) => void): void;
  };
  return new Promise((resolve) =>
    client.check({ service: name }, (err, res) => {
      client.close();
      resolve(err ? `error:${grpc.status[err.code]}` : String(res!.status));
    }),
  );
}

describe("health and metrics", () => {
  it("scheduler: /healthz, /readyz, gRPC health, and /metrics counting requests, tokens and agents", async () => {
    const scheduler = await inProcessScheduler();
    cleanups.push(() => scheduler.close());
    const base = httpBase(scheduler);
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ status: "ok" });
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    expect(await grpcHealth(scheduler.grpc.port, "")).toBe("SERVING");
    expect(await grpcHealth(scheduler.grpc.port, FLEET_SERVICE)).toBe("SERVING");
    expect(await grpcHealth(scheduler.grpc.port, "no.such.Service")).toBe("error:NOT_FOUND");

    let m = parseMetrics(await (await fetch(`${base}/metrics`)).text());
    expect(m.get('kiln_fleet_agents_connected{component="scheduler"}')).toBe(0);
    const agent = await inProcessAgent(scheduler);
    cleanups.push(() => agent.close());
    await waitForAgents(scheduler, 1);
    const key = (await scheduler.keys.create({ account: "ops", tier: "pro" })).token;
    const res = await postChat(base, key, { model: MODEL_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 5, temperature: 0 });
    expect(res.status).toBe(200);

    // The register message carried the hardware, truthfully for this CPU-only machine.
    const hw = scheduler.fleet.snapshot()[0]!.hardware!;
    expect(hw).toMatchObject({ compute: "cpu", gpus: [], cuda_available: false });
    expect(Number(hw.disk_total_bytes)).toBeGreaterThan(0);
    expect(Number(hw.memory_total_bytes)).toBeGreaterThan(0);
    const models = (await (await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
      models: { id: string; gpu_type: string; memory_gb: number }[];
    };
    expect(models.models.find((x) => x.id === MODEL_ID)).toMatchObject({ gpu_type: "none (CPU)", memory_gb: expect.any(Number) });

    m = parseMetrics(await (await fetch(`${base}/metrics`)).text());
    expect(m.get('kiln_fleet_agents_connected{component="scheduler"}')).toBe(1);
    expect(m.get('kiln_fleet_slots{state="free",component="scheduler"}')).toBe(4);
    expect(sum(m, "kiln_tokens_total", 'kind="completion"')).toBe(5);
    expect(sum(m, "kiln_time_to_first_token_seconds_count")).toBe(1);
    expect(sum(m, "kiln_generation_tokens_per_second_count")).toBe(1);
    expect(sum(m, "kiln_completions_total", 'finish_reason="length"')).toBe(1);
    expect(sum(m, "kiln_scheduler_http_requests_total", 'route="/v1/chat/completions"')).toBe(1);
    expect(sum(m, "process_resident_memory_bytes")).toBeGreaterThan(0);
  });

  it("agent: /readyz follows the scheduler link; /metrics shows the link, sequences and jobs", async () => {
    const scheduler = await inProcessScheduler();
    let schedulerOpen = true;
    cleanups.push(() => (schedulerOpen ? scheduler.close() : Promise.resolve()));
    const agent = await inProcessAgent(scheduler);
    cleanups.push(() => agent.close());
    const base = `http://127.0.0.1:${agent.http.port}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    await until(async () => (await fetch(`${base}/readyz`)).status === 200, 10_000, "the agent to be ready");
    const metrics = parseMetrics(await (await fetch(`${base}/metrics`)).text());
    expect(metrics.get('kiln_scheduler_connected{component="agent"}')).toBe(1);
    expect(metrics.get('kiln_llm_sequences{state="free",component="agent"}')).toBe(4);
    expect(metrics.has('kiln_asr_jobs{state="running",component="agent"}')).toBe(true);

    await scheduler.close();
    schedulerOpen = false;
    await until(async () => (await fetch(`${base}/readyz`)).status === 503, 10_000, "the agent to notice the scheduler is gone");
    const body = (await (await fetch(`${base}/readyz`)).json()) as { checks: Record<string, boolean> };
    expect(body.checks.scheduler_connected).toBe(false);
  });
});

describe("idle connections (--idle-timeout)", () => {
  it("the scheduler closes a connection that opens and sends nothing, and one that stalls in its body, within the timeout", async () => {
    const scheduler = await inProcessScheduler({ idleTimeout: "1" });
    cleanups.push(() => scheduler.close());
    const key = (await scheduler.keys.create({ account: "idle", tier: "pro" })).token;
    const sends = ["", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":`];
    for (const first of sends) {
      const socket = connect(scheduler.http.port, "127.0.0.1");
      socket.on("error", () => undefined).resume();
      await new Promise((r) => socket.once("connect", r));
      const t0 = Date.now();
      if (first) socket.write(first);
      const closed = await Promise.race([new Promise<boolean>((r) => socket.once("close", () => r(true))), new Promise<boolean>((r) => setTimeout(() => r(false), 5000))]);
      socket.destroy();
      expect(closed, first.slice(0, 30) || "nothing sent").toBe(true);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    }
    // and it serves on
    expect((await fetch(`${httpBase(scheduler)}/healthz`)).status).toBe(200);
  });

  it("the gRPC port closes a connection that sends nothing, and one that opens an HTTP/2 session with no call, within the timeout; an agent's link stays", async () => {
    const scheduler = await inProcessScheduler({ idleTimeout: "1" });
    cleanups.push(() => scheduler.close());
    const agent = await inProcessAgent(scheduler, { threads: "1" });
    cleanups.push(() => agent.close());
    await waitForAgents(scheduler, 1);
    const closes = (s: { once(event: "close", f: () => void): unknown }) =>
      Promise.race([new Promise<boolean>((r) => s.once("close", () => r(true))), new Promise<boolean>((r) => setTimeout(() => r(false), 5000))]);
    const silent = connect(scheduler.grpc.port, "127.0.0.1");
    silent.on("error", () => undefined).resume();
    await new Promise((r) => silent.once("connect", r));
    expect(await closes(silent), "a TCP connection that sends nothing").toBe(true);
    const session = http2.connect(`http://127.0.0.1:${scheduler.grpc.port}`);
    session.on("error", () => undefined);
    await new Promise((r) => session.once("connect", r));
    expect(await closes(session), "an HTTP/2 session with no call").toBe(true);
    await new Promise((r) => setTimeout(r, 1500));
    expect(scheduler.fleet.snapshot().map((a) => a.nodeId)).toHaveLength(1); // the agent's stream is a call: never idle
  });
});

/**
 * The control plane's own cost, with no agent: validated-and-rejected requests through one and
 * through two `kiln scheduler` processes sharing one PostgreSQL database and one Redis (Debian's
 * binaries, started here on free ports).
 *
 * Each request is a chat completion that passes everything the scheduler does before a model runs
 * (the key checked against the database, the requests-per-minute window and the place in flight
 * in Redis, the body parsed) and is refused at validation (400: `messages` empty). CONCURRENCY
 * clients send them for SECONDS, first all to one scheduler, then spread over two; printed:
 * requests per second, p50 and p99 latency, and two ÷ one (target ≥ 1.8 where cores allow: each
 * scheduler is one Node process, one core; PostgreSQL, Redis and this load generator share the
 * machine).
 *
 * Then the time a revocation takes to bite: a client sends requests with a key to scheduler B, one
 * after another; the key is revoked in the database (as `kiln keys revoke` does, or scheduler A's
 * admin API); printed: the time from the revocation's commit to B's first 401 (target < 1 s).
 *
 *   npm run bench:gateway -- [--seconds 10] [--concurrency 32]
 *
 * With `--bare`: the gateway against its floor, on one `kiln scheduler` with its default store
 * (SQLite, a file in a temporary folder; no PostgreSQL or Redis) and, beside it, a bare `node:http`
 * server (`lib/bare-http.ts`, also a child process) that answers each probe with the scheduler's own
 * status and body, byte for byte, and does nothing else. Three probes, each sent by the same load
 * generator (CONCURRENCY undici clients, closed loop, SECONDS each, after a warm-up) first to the
 * scheduler, then to the bare server:
 *
 * - `rejected`: `POST /v1/chat/completions` with a valid key and `{"model":"famB-v3.1","messages":[]}`
 *   (the key checked, the rate limit and token quota counted, the body parsed, refused: 400);
 * - `noKey`: the same request without `Authorization` (401);
 * - `models`: `GET /v1/models` with a valid key (200, the built-in ids, no agent).
 *
 * Printed: requests per second, p50 and p99 of each, the CPU each server's process spent per request
 * (Linux's /proc: steadier than requests per second on a machine shared with other work), and
 * scheduler ÷ bare requests per second for each (targets, issue 42: `rejected` ≥ 0.5, `noKey` and
 * `models` ≥ 0.7). `--rounds N` repeats the pairs N times (the
 * median ratio is printed beside each round's); `--probes rejected,models` runs only those;
 * `--cpu-prof DIR` runs the scheduler under `node --cpu-prof` and writes its profile into DIR when
 * it ends.
 *
 *   npm run bench:gateway -- --bare [--seconds 10] [--concurrency 32] [--rounds 1] [--probes LIST] [--cpu-prof DIR]
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Agent, request } from "undici";
import { createLogger } from "../core/log.js";
import { KeyService } from "../scheduler/auth/index.js";
import { openStore } from "../scheduler/store/index.js";
import type { BareAnswer } from "./lib/bare-http.js";
import { argValue, median, quantile } from "./lib/cli.js";
import { cpuSeconds } from "./lib/run.js";
import { postgresBin, redisBin, startPostgres, startRedis } from "./lib/servers.js";

const seconds = Number(argValue(process.argv, "--seconds") ?? "10");
const concurrency = Number(argValue(process.argv, "--concurrency") ?? "32");
const NODE_TOKEN = "bench-gateway-node-token-0123456789";
const SECRETS_KEY = "5a".repeat(32);

/** Starts `kiln scheduler` on `db` (with `--redis` when given); resolves with the child and its HTTP port once it listens. */
function startScheduler(db: string, redisUrl: string | undefined, nodeFlags: string[] = []): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [...nodeFlags, resolve("bin/kiln.js"), "scheduler", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--db", db, ...(redisUrl ? ["--redis", redisUrl] : [])],
    // logs at info, as deployed; read (and dropped) as they come, so the pipe never fills
    { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, KILN_LOG_LEVEL: "info", KILN_NODE_TOKENS: NODE_TOKEN, KILN_SECRETS_KEY: SECRETS_KEY } },
  );
  return new Promise((ok, fail) => {
    child.once("exit", (code) => fail(new Error(`kiln scheduler exited (${code}) before listening`)));
    child.stdout!.setEncoding("utf8");
    let buffered: string | undefined = "";
    child.stdout!.on("data", (d: string) => {
      if (buffered === undefined) return;
      buffered += d;
      const m = /"http":"127\.0\.0\.1:(\d+)"/.exec(buffered);
      if (m) {
        buffered = undefined;
        ok({ child, port: Number(m[1]) });
      }
    });
  });
}

interface Run {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  statuses: Record<number, number>;
}

/** One kind of request the load generator sends. */
interface Probe {
  method: "GET" | "POST";
  path: string;
  body?: string;
  headers: Record<string, string>;
}

/** The validated-and-rejected chat completion (400: `messages` empty) with `key`. */
const rejected = (key: string): Probe => ({
  method: "POST",
  path: "/v1/chat/completions",
  body: JSON.stringify({ model: "famB-v3.1", messages: [] }),
  headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
});

/** CONCURRENCY clients, each sending `probe` one after another to the next port in turn, for SECONDS (or `forSeconds`). */
async function load(ports: number[], probe: Probe, forSeconds = seconds): Promise<Run> {
  const dispatcher = new Agent({ connections: concurrency, pipelining: 1 });
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  const end = performance.now() + forSeconds * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const port = ports[next++ % ports.length]!;
        const t = performance.now();
        const res = await request(`http://127.0.0.1:${port}${probe.path}`, {
          method: probe.method,
          dispatcher,
          ...(probe.body !== undefined ? { body: probe.body } : {}),
          headers: probe.headers,
        });
        await res.body.dump();
        latencies.push(performance.now() - t);
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      }
    }),
  );
  await dispatcher.close();
  return { requests: latencies.length, rps: Math.round(latencies.length / forSeconds), p50: round(quantile(latencies, 0.5)), p99: round(quantile(latencies, 0.99)), statuses };
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/** Milliseconds from a revocation's commit to scheduler `port`'s first 401 for the key, sending one request after another. */
async function revocationBite(keys: KeyService, port: number): Promise<number> {
  const { id, token } = await keys.create({ account: "bench-revoke", tier: "enterprise", rpm: 1_000_000 });
  const dispatcher = new Agent({ connections: 1 });
  const send = async () => {
    const res = await request(`http://127.0.0.1:${port}/v1/models`, { dispatcher, headers: { authorization: `Bearer ${token}` } });
    await res.body.dump();
    return res.statusCode;
  };
  for (let i = 0; i < 20; i++) if ((await send()) !== 200) throw new Error("the key was refused before its revocation");
  let revokedAt = 0;
  const revoking = keys.revoke(id).then(() => {
    revokedAt = performance.now();
  });
  for (;;) {
    const status = await send();
    if (status === 401 && revokedAt) break;
  }
  const bite = performance.now() - revokedAt;
  await revoking;
  await dispatcher.close();
  return round(bite);
}

async function main(): Promise<void> {
  const pgBin = postgresBin();
  const redisServer = redisBin();
  if (!pgBin || !redisServer) throw new Error("needs Debian's postgresql and redis-server (apt-get install postgresql redis-server)");
  const [pg, redis] = await Promise.all([startPostgres(pgBin), startRedis(redisServer)]);
  const children: ChildProcess[] = [];
  try {
    const db = `postgres://postgres@127.0.0.1:${pg.port}/app`;
    const a = await startScheduler(db, redis.url);
    children.push(a.child);
    const b = await startScheduler(db, redis.url);
    children.push(b.child);
    const store = await openStore(db, { logger: createLogger("bench", "silent") });
    const keys = await KeyService.open(store);
    const { token } = await keys.create({ account: "bench", tier: "enterprise", rpm: 10_000_000 });
    await load([a.port], rejected(token)); // warm-up: JIT, connection pools
    const one = await load([a.port], rejected(token));
    const two = await load([a.port, b.port], rejected(token));
    const bites: number[] = [];
    for (let i = 0; i < 5; i++) bites.push(await revocationBite(keys, b.port));
    await store.close();
    console.log(
      JSON.stringify(
        {
          machine: { cores: cpus().length },
          seconds,
          concurrency,
          oneScheduler: one,
          twoSchedulers: two,
          twoOverOne: round(two.rps / one.rps),
          revocationBiteMs: { runs: bites, max: Math.max(...bites) },
        },
        null,
        2,
      ),
    );
  } finally {
    for (const c of children) c.kill("SIGKILL");
    redis.stop();
    pg.stop();
  }
}

/** Issue 42's targets: the scheduler's requests per second over the bare server's, at least. */
const TARGETS = { rejected: 0.5, noKey: 0.7, models: 0.7 } as const;
type ProbeName = keyof typeof TARGETS;

/** Starts the bare server (`lib/bare-http.ts`) as a child answering `answers`; resolves with it and its port. */
function startBare(answers: BareAnswer[]): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [resolve("dist/scripts/lib/bare-http.js")], { stdio: ["pipe", "pipe", "inherit"] });
  child.stdin!.end(JSON.stringify(answers));
  return new Promise((ok, fail) => {
    child.once("exit", (code) => fail(new Error(`the bare server exited (${code}) before listening`)));
    child.stdout!.setEncoding("utf8");
    let buffered = "";
    child.stdout!.on("data", (d: string) => {
      buffered += d;
      const m = /\{"port":(\d+)\}/.exec(buffered);
      if (m) ok({ child, port: Number(m[1]) });
    });
  });
}

/** `load` on one server, with the CPU its process spent per request (µs). */
async function measured(port: number, pid: number | undefined, probe: Probe): Promise<Run & { cpuUsPerRequest?: number }> {
  const before = cpuSeconds(pid);
  const run = await load([port], probe);
  const after = cpuSeconds(pid);
  return before === undefined || after === undefined ? run : { ...run, cpuUsPerRequest: Math.round(((after - before) * 1e6) / run.requests) };
}

/** One answer of the scheduler to `probe`, recorded for the bare server to give back. */
async function record(port: number, probe: Probe): Promise<BareAnswer> {
  const res = await request(`http://127.0.0.1:${port}${probe.path}`, { method: probe.method, ...(probe.body !== undefined ? { body: probe.body } : {}), headers: probe.headers });
  return {
    method: probe.method,
    path: probe.path,
    authorized: "authorization" in probe.headers,
    status: res.statusCode,
    contentType: String(res.headers["content-type"]),
    body: await res.body.text(),
  };
}

/** The scheduler (SQLite, no Redis) against a bare `node:http` server answering the same bodies, in one run. */
async function bareMain(): Promise<void> {
  const rounds = Number(argValue(process.argv, "--rounds") ?? "1");
  const profileDir = argValue(process.argv, "--cpu-prof");
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-gateway-"));
  const children: ChildProcess[] = [];
  const loadBefore = loadavg();
  try {
    const db = join(dir, "kiln.db");
    const scheduler = await startScheduler(db, undefined, profileDir ? ["--cpu-prof", "--cpu-prof-dir", resolve(profileDir)] : []);
    children.push(scheduler.child);
    const store = await openStore(db, { logger: createLogger("bench", "silent") });
    const keys = await KeyService.open(store);
    const { token } = await keys.create({ account: "bench", tier: "enterprise", rpm: 1_000_000_000 });
    await store.close();
    const probes: Record<ProbeName, Probe> = {
      rejected: rejected(token),
      noKey: { ...rejected(token), headers: { "content-type": "application/json" } },
      models: { method: "GET", path: "/v1/models", headers: { authorization: `Bearer ${token}` } },
    };
    const answers = await Promise.all(Object.values(probes).map((p) => record(scheduler.port, p)));
    const expected = { rejected: 400, noKey: 401, models: 200 };
    for (const [i, name] of (Object.keys(probes) as ProbeName[]).entries())
      if (answers[i]!.status !== expected[name]) throw new Error(`${name}: the scheduler answered ${answers[i]!.status}, expected ${expected[name]}: ${answers[i]!.body}`);
    const bare = await startBare(answers);
    children.push(bare.child);
    // the bare server's bodies are the scheduler's, byte for byte
    for (const [i, p] of Object.values(probes).entries()) {
      const got = await record(bare.port, p);
      if (got.status !== answers[i]!.status || got.body !== answers[i]!.body) throw new Error(`the bare server's answer to ${p.method} ${p.path} differs from the scheduler's`);
    }
    type Measured = Awaited<ReturnType<typeof measured>>;
    const results: Record<ProbeName, { scheduler: Measured[]; bare: Measured[]; ratios: number[] }> = {
      rejected: { scheduler: [], bare: [], ratios: [] },
      noKey: { scheduler: [], bare: [], ratios: [] },
      models: { scheduler: [], bare: [], ratios: [] },
    };
    const warmUp = Math.min(seconds, 3);
    const only = argValue(process.argv, "--probes")?.split(",");
    const names = (Object.keys(probes) as ProbeName[]).filter((n) => !only || only.includes(n));
    for (let round = 0; round < rounds; round++) {
      for (const name of names) {
        const r = results[name];
        await load([scheduler.port], probes[name], warmUp); // warm-up: JIT, connection pools
        r.scheduler.push(await measured(scheduler.port, scheduler.child.pid, probes[name]));
        await load([bare.port], probes[name], warmUp);
        r.bare.push(await measured(bare.port, bare.child.pid, probes[name]));
        r.ratios.push(round3(r.scheduler.at(-1)!.rps / r.bare.at(-1)!.rps));
      }
    }
    const summary = Object.fromEntries(
      names.map((name) => {
        const r = results[name];
        const ratio = median(r.ratios);
        return [
          name,
          {
            status: expected[name],
            schedulerRps: r.scheduler.map((x) => x.rps),
            bareRps: r.bare.map((x) => x.rps),
            schedulerP50Ms: r.scheduler.map((x) => x.p50),
            schedulerP99Ms: r.scheduler.map((x) => x.p99),
            bareP50Ms: r.bare.map((x) => x.p50),
            schedulerCpuUsPerRequest: r.scheduler.map((x) => x.cpuUsPerRequest),
            bareCpuUsPerRequest: r.bare.map((x) => x.cpuUsPerRequest),
            schedulerStatuses: r.scheduler.map((x) => x.statuses),
            ratios: r.ratios,
            ratio: round3(ratio),
            target: TARGETS[name],
            met: ratio >= TARGETS[name],
          },
        ];
      }),
    );
    console.log(
      JSON.stringify({ machine: { cores: cpus().length, loadBefore: loadBefore.map(round), loadAfter: loadavg().map(round) }, seconds, concurrency, rounds, ...summary }, null, 2),
    );
  } finally {
    for (const c of children) c.kill(profileDir ? "SIGTERM" : "SIGKILL"); // a profile is written when the scheduler exits on its own
    if (profileDir) await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once("exit", r)) : undefined)));
    rmSync(dir, { recursive: true, force: true });
  }
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

(process.argv.includes("--bare") ? bareMain() : main()).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});

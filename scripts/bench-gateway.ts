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
 */
import { spawn, type ChildProcess } from "node:child_process";
import { cpus } from "node:os";
import { resolve } from "node:path";
import { Agent, request } from "undici";
import { createLogger } from "../core/log.js";
import { KeyService } from "../scheduler/auth/index.js";
import { openStore } from "../scheduler/store/index.js";
import { argValue, quantile } from "./lib/cli.js";
import { postgresBin, redisBin, startPostgres, startRedis } from "./lib/servers.js";

const seconds = Number(argValue(process.argv, "--seconds") ?? "10");
const concurrency = Number(argValue(process.argv, "--concurrency") ?? "32");
const NODE_TOKEN = "bench-gateway-node-token-0123456789";
const SECRETS_KEY = "5a".repeat(32);

/** Starts `kiln scheduler`; resolves with the child and its HTTP port once it listens. */
function startScheduler(db: string, redisUrl: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [resolve("bin/kiln.js"), "scheduler", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--db", db, "--redis", redisUrl],
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

/** CONCURRENCY clients, each sending one request after another to the next port in turn, for SECONDS. */
async function load(ports: number[], key: string): Promise<Run> {
  const dispatcher = new Agent({ connections: concurrency, pipelining: 1 });
  const body = JSON.stringify({ model: "famB-v3.1", messages: [] });
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  const end = performance.now() + seconds * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const port = ports[next++ % ports.length]!;
        const t = performance.now();
        const res = await request(`http://127.0.0.1:${port}/v1/chat/completions`, {
          method: "POST",
          dispatcher,
          body,
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        });
        await res.body.dump();
        latencies.push(performance.now() - t);
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      }
    }),
  );
  await dispatcher.close();
  return { requests: latencies.length, rps: Math.round(latencies.length / seconds), p50: round(quantile(latencies, 0.5)), p99: round(quantile(latencies, 0.99)), statuses };
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
    await load([a.port], token); // warm-up: JIT, connection pools
    const one = await load([a.port], token);
    const two = await load([a.port, b.port], token);
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

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});

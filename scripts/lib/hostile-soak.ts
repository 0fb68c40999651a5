/**
 * The scheduler under attack (`npm run soak -- --hostile`): a scheduler and an honest agent as
 * `kiln` processes on loopback; an honest tenant streams chat and transcribes audio through the
 * scheduler, first alone (the calm phase, its latency's baseline), then while
 *
 * - a hostile tenant hammers `POST /v1/mcp/test` against servers of its own that send malformed
 *   bytes, floods or nothing, one of each kind (PostgreSQL, MySQL, websocket, HTTP), and
 * - a lying node with a valid token registers beyond its token, lies about the usage of what it
 *   serves (the hostile tenant's own requests, for a model only it offers) and sends oversized
 *   messages.
 *
 * It checks that the scheduler never restarted or met a fault, that the honest requests all
 * succeeded within their latency bound, that the honest tenant was charged exactly what its
 * answers said, and that the hostile tenant was charged no more than the bounds the scheduler
 * computes (`max_tokens` per answer), whatever the liar reported.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultModelDir, ensureTestModel, ensureTestSpeechModels } from "../../fabricate/index.js";
import { PROMPT_OVERHEAD } from "../../scheduler/fleet/limits.js";
import { uniformSource as random } from "../../fabricate/tensors.js";
import { httpFlood, mysqlUnsolicited, postgresFlood, postgresMalformedRow, silentServer, websocketBadRedirect, type Upstream } from "./hostile-upstreams.js";
import { startLiar, type LiarReport } from "./liar.js";
import { makeAudio, toneBursts } from "./media.js";
import { freePort, kilnKey, until } from "./run.js";
import { Managed } from "./soak.js";

export interface HostileSoakOptions {
  /** How long the attacks run, in seconds (after a calm phase of `calmSeconds`). */
  seconds: number;
  /** Draws the workload's and the attacks' choices. */
  seed: number;
  /** Seconds of honest load alone first: the latency baseline. Default 10. */
  calmSeconds?: number;
  /** The honest requests' p95 latency under attack may be at most this many times the calm one's (or 2 s more). Default 5. */
  latencyFactor?: number;
  /** The scheduler's resident memory may not pass this many MiB. Default 1024. */
  memoryBoundMb?: number;
  log?: (line: string) => void;
}

export interface HostileSoakReport {
  seconds: number;
  seed: number;
  mcp: { tests: number; byCode: Record<string, number> };
  liar: LiarReport;
  honest: {
    chat: { sent: number; completed: number; calmP95Ms: number; hostileP95Ms: number };
    audio: { sent: number; completed: number };
  };
  charges: {
    honest: { seen: Totals; ledger: Totals };
    /** What the liar served the hostile tenant; the ledger must hold no more than the scheduler's bounds for it. */
    hostile: { answers: number; maxTokensEach: number; ledger: Totals };
  };
  scheduler: { starts: number; faults: number; peakRssMb: number };
  failures: string[];
  passed: boolean;
}

interface Totals {
  prompt_tokens: number;
  completion_tokens: number;
  audio_seconds: number;
}

/** A catalog id the honest agent serves, and one only the liar offers (its token allows it no other). */
const HONEST_MODEL = "famB-v3.1";
const LIAR_MODEL = "famC-k2";
const HONEST_TOKEN = "soak-node-token-0123456789";
const LIAR_TOKEN = "liar-node-token-0123456789";
/** Where the hostile tenant's servers listen (the scheduler lets tenants reach it, as if it were the internet). */
const TENANT_HOST = "127.0.0.2";
const HOSTILE_MAX_TOKENS = 8;
const HOSTILE_PROMPT = "hi";
const REQUEST_TIMEOUT_MS = 60_000;
const MB = 1024 ** 2;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const zero = (): Totals => ({ prompt_tokens: 0, completion_tokens: 0, audio_seconds: 0 });

export async function runHostileSoak(options: HostileSoakOptions): Promise<HostileSoakReport> {
  const log = options.log ?? (() => undefined);
  const rand = random(options.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
  const root = mkdtempSync(join(tmpdir(), "kiln-hostile-"));
  const report: HostileSoakReport = {
    seconds: options.seconds,
    seed: options.seed,
    mcp: { tests: 0, byCode: {} },
    liar: { registrations: 0, refused: {}, completions: 0, oversized: 0, linksClosed: 0 },
    honest: { chat: { sent: 0, completed: 0, calmP95Ms: 0, hostileP95Ms: 0 }, audio: { sent: 0, completed: 0 } },
    charges: { honest: { seen: zero(), ledger: zero() }, hostile: { answers: 0, maxTokensEach: HOSTILE_MAX_TOKENS, ledger: zero() } },
    scheduler: { starts: 0, faults: 0, peakRssMb: 0 },
    failures: [],
    passed: false,
  };
  let unlisted = 0;
  const fail = (what: string) => {
    log(`FAILURE: ${what}`);
    if (report.failures.length < 50) report.failures.push(what);
    else if (++unlisted === 1) report.failures.push("… and more (the log lists them)");
  };

  const chatModel = await ensureTestModel("tiny");
  const speech = await ensureTestSpeechModels(defaultModelDir());
  const media = join(root, "media");
  mkdirSync(media);
  const clip = readFileSync(makeAudio(join(media, "talk.flac"), toneBursts(16)));

  const db = join(root, "kiln.db");
  const alice = kilnKey(db, "alice");
  const mallory = kilnKey(db, "mallory");
  const [httpPort, grpcPort, agentPort] = [await freePort(), await freePort(), await freePort()];
  const scheduler = new Managed(
    "scheduler",
    ["scheduler", "--http", `127.0.0.1:${httpPort}`, "--grpc", `127.0.0.1:${grpcPort}`, "--db", db, "--heartbeat-ms", "500"],
    {
      // the liar's token lets it register one node id and offer one model, on 4 slots
      KILN_NODE_TOKENS: `soak-*=${HONEST_TOKEN},liar-1;models:${LIAR_MODEL};slots:4=${LIAR_TOKEN}`,
      KILN_MCP_ALLOW_CIDR: `${TENANT_HOST}/32`,
      KILN_MCP_TIMEOUT: "3",
    },
    /scheduler listening/,
    /uncaught exception|unhandled rejection/,
  );
  const agent = new Managed(
    "agent",
    [
      "agent",
      ...["--scheduler", `127.0.0.1:${grpcPort}`, "--node-id", "soak-a", "--serve", `${HONEST_MODEL}=${chatModel}`],
      ...["--threads", "1", "--gpu", "cpu", "--context-size", "2048", "--sequences", "2"],
      ...["--whisper-dir", speech.whisperDir, "--vad-model", speech.vadModel, "--asr-parallel", "1", "--asr-threads", "1"],
      ...["--host", "127.0.0.1", "--port", String(agentPort), "--data-dir", join(root, "agent")],
    ],
    { KILN_NODE_TOKEN: HONEST_TOKEN },
    /transcription API listening/,
  );
  const api = `http://127.0.0.1:${httpPort}`;
  const upstreams: Upstream[] = [];
  const killAll = () => [scheduler, agent].forEach((p) => p.kill());
  process.once("exit", killAll);
  const sampler = setInterval(() => scheduler.sample(), 250);
  let liar: Awaited<ReturnType<typeof startLiar>> | undefined;
  /** The honest chat requests' latencies, by phase. */
  const latencies = { calm: [] as number[], hostile: [] as number[] };

  try {
    await scheduler.start();
    await agent.start();
    await until(async () => (await modelStatus(api, alice, HONEST_MODEL)) === "available", 30_000, "the honest agent's model to be available", 200);
    log(`started: scheduler ${api}, agent soak-a`);

    // --- the honest tenant, from the start: its calm-phase latency is the baseline ---
    let phase: "calm" | "hostile" | "over" = "calm";
    const seen = report.charges.honest.seen;
    const honestChat = async () => {
      while (phase !== "over") {
        const at = phase as "calm" | "hostile";
        report.honest.chat.sent++;
        const started = performance.now();
        const res = await post(api, alice, "/v1/chat/completions", {
          model: HONEST_MODEL,
          max_tokens: 8 + Math.floor(rand() * 24),
          messages: [{ role: "user", content: "Tell me about kilns." }],
        });
        const ms = performance.now() - started;
        const usage = (res.body as { usage?: { prompt_tokens: number; completion_tokens: number } } | undefined)?.usage;
        if (res.status === 200 && usage) {
          report.honest.chat.completed++;
          latencies[at].push(ms);
          seen.prompt_tokens += usage.prompt_tokens;
          seen.completion_tokens += usage.completion_tokens;
        } else fail(`an honest chat request was answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
        await sleep(50 + rand() * 200);
      }
    };
    const honestAudio = async () => {
      while (phase !== "over") {
        report.honest.audio.sent++;
        const form = new FormData();
        form.append("model", "whisper-1");
        form.append("response_format", "verbose_json");
        form.append("temperature_increment", "0");
        form.append("file", new Blob([clip]), "talk.flac");
        const res = await fetch(`${api}/v1/audio/transcriptions`, {
          method: "POST",
          headers: { authorization: `Bearer ${alice}` },
          body: form,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        })
          .then(async (r) => ({ status: r.status, body: (await r.json()) as { duration?: number } }))
          .catch((err: unknown) => ({ status: 0, body: { error: String(err) } as { duration?: number } }));
        if (res.status === 200 && typeof res.body.duration === "number") {
          report.honest.audio.completed++;
          seen.audio_seconds += res.body.duration;
        } else fail(`an honest transcription was answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
        await sleep(1000 + rand() * 2000);
      }
    };
    const honest = Promise.all([honestChat(), honestChat(), honestAudio()]);
    await sleep((options.calmSeconds ?? 10) * 1000);

    // --- the attacks ---
    phase = "hostile";
    log("calm phase over: the attacks begin");
    upstreams.push(
      await websocketBadRedirect(TENANT_HOST),
      await postgresMalformedRow(TENANT_HOST),
      await mysqlUnsolicited(TENANT_HOST),
      await postgresFlood(TENANT_HOST, 200 * MB),
      await httpFlood(TENANT_HOST, 200 * MB),
      await silentServer(TENANT_HOST),
    );
    const [wsBad, pgBad, myBad, pgFlood, flood, silent] = upstreams as [Upstream, Upstream, Upstream, Upstream, Upstream, Upstream];
    const configs: [string, Record<string, unknown>][] = [
      ["websocket", { url: `ws://${TENANT_HOST}:${wsBad.port}/feed`, subscription: { topics: ["t"] } }],
      ["postgresql", { connection: { host: TENANT_HOST, port: pgBad.port, database: "app" } }],
      ["mysql", { connection: { host: TENANT_HOST, port: myBad.port, database: "app" } }],
      ["postgresql", { connection: { host: TENANT_HOST, port: pgFlood.port, database: "app" } }],
      ["mcp", { transport: "http", url: `http://${TENANT_HOST}:${flood.port}/mcp` }],
      ["rest_api", { base_url: `http://${TENANT_HOST}:${flood.port}/v1`, endpoints: [{ name: "x", method: "GET", path: "/x" }] }],
      ["websocket", { url: `ws://${TENANT_HOST}:${flood.port}/feed`, subscription: { topics: ["t"] } }],
      ["mongodb", { connection: { host: TENANT_HOST, port: silent.port, database: "app" } }],
    ];
    const deadline = Date.now() + options.seconds * 1000;
    const mcpTests = async () => {
      while (Date.now() < deadline) {
        const [server_type, config] = pick(configs);
        const created = await post(api, mallory, "/v1/mcp/servers", { name: `x-${server_type}`, server_type, config });
        const id = (created.body as { id?: string } | undefined)?.id;
        if (created.status !== 201 || !id) {
          fail(`an MCP configuration was answered ${created.status}: ${JSON.stringify(created.body).slice(0, 300)}`);
          await sleep(1000);
          continue;
        }
        const tested = await post(api, mallory, "/v1/mcp/test", { server_id: id });
        report.mcp.tests++;
        const code = (tested.body as { error?: { code?: string } } | undefined)?.error?.code ?? String(tested.status);
        report.mcp.byCode[code] = (report.mcp.byCode[code] ?? 0) + 1;
        // 502 naming the server, or 200 where the integration reads only a capped probe (rest_api's base URL)
        if (tested.status !== 502 && tested.status !== 200)
          fail(`an MCP test of a hostile ${server_type} server was answered ${tested.status}: ${JSON.stringify(tested.body).slice(0, 300)}`);
        await fetch(`${api}/v1/mcp/servers/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${mallory}` } }).catch(() => undefined);
      }
    };
    liar = startLiar({ grpc: `127.0.0.1:${grpcPort}`, token: LIAR_TOKEN, nodeId: "liar-1", model: LIAR_MODEL, log });
    const lying = liar.attack(deadline);
    await until(async () => (await modelStatus(api, mallory, LIAR_MODEL)) === "available", 30_000, "the liar's model to be available", 200);
    const hostileChat = async () => {
      while (Date.now() < deadline) {
        const res = await post(api, mallory, "/v1/chat/completions", { model: LIAR_MODEL, max_tokens: HOSTILE_MAX_TOKENS, messages: [{ role: "user", content: HOSTILE_PROMPT }] });
        if (res.status === 200) report.charges.hostile.answers++;
        await sleep(100 + rand() * 300);
      }
    };
    await Promise.all([mcpTests(), mcpTests(), mcpTests(), mcpTests(), hostileChat(), lying]);
    phase = "over";
    await honest;
    log(`attacks over: ${report.mcp.tests} MCP tests, ${report.charges.hostile.answers} answers from the liar`);
    report.liar = liar.report();

    // --- the bills, as /v1/usage tells them (the ledger writes in batches: asked until they settle) ---
    report.charges.honest.ledger = await settledUsage(api, alice, (t) => sameTotals(t, seen));
    report.charges.hostile.ledger = await settledUsage(api, mallory, () => false, 3000);
  } finally {
    clearInterval(sampler);
    liar?.stop();
    for (const u of upstreams) u.close();
    report.scheduler = { starts: scheduler.starts, faults: scheduler.tallied, peakRssMb: scheduler.peakRssMb };
    const schedulerWasUp = scheduler.up;
    await Promise.all([scheduler.stop("SIGTERM"), agent.stop("SIGTERM")]);
    process.removeListener("exit", killAll);
    rmSync(root, { recursive: true, force: true });
    if (!schedulerWasUp) fail("the scheduler was not running at the end");
  }

  // --- the checks ---
  const { chat } = report.honest;
  chat.calmP95Ms = Math.round(p95(latencies.calm));
  chat.hostileP95Ms = Math.round(p95(latencies.hostile));
  if (report.scheduler.starts !== 1) fail(`the scheduler was started ${report.scheduler.starts} times`);
  if (report.scheduler.faults > 0) fail(`the scheduler logged ${report.scheduler.faults} uncaught faults`);
  const memoryBound = options.memoryBoundMb ?? 1024;
  if (report.scheduler.peakRssMb > memoryBound) fail(`the scheduler reached ${report.scheduler.peakRssMb} MiB, past the ${memoryBound} MiB bound`);
  const latencyBound = Math.max(chat.calmP95Ms * (options.latencyFactor ?? 5), chat.calmP95Ms + 2000);
  if (chat.hostileP95Ms > latencyBound)
    fail(`the honest chat's p95 under attack was ${chat.hostileP95Ms} ms, past its bound of ${Math.round(latencyBound)} ms (calm: ${chat.calmP95Ms} ms)`);
  const { honest: bill, hostile } = report.charges;
  if (!sameTotals(bill.ledger, bill.seen)) fail(`the honest tenant was charged ${JSON.stringify(bill.ledger)} for answers that said ${JSON.stringify(bill.seen)}`);
  // what the liar served is charged within what the scheduler computes from each request: max_tokens, and the prompt's bytes plus the template's overhead
  const served = Math.max(hostile.answers, report.liar.completions);
  const completionBound = served * HOSTILE_MAX_TOKENS;
  const promptBound = served * (Buffer.byteLength(HOSTILE_PROMPT) + PROMPT_OVERHEAD.perMessage + PROMPT_OVERHEAD.perRequest);
  if (hostile.ledger.completion_tokens > completionBound)
    fail(`the hostile tenant was charged ${hostile.ledger.completion_tokens} completion tokens for at most ${completionBound} (max_tokens ${HOSTILE_MAX_TOKENS} per answer)`);
  if (hostile.ledger.prompt_tokens > promptBound) fail(`the hostile tenant was charged ${hostile.ledger.prompt_tokens} prompt tokens for at most ${promptBound}`);
  if (report.mcp.tests === 0) fail("no MCP test ran: the soak attacked nothing");
  if (report.liar.completions === 0) fail("the liar served nothing: its usage lies were never tested");
  if (chat.completed === 0 || report.honest.audio.completed === 0) fail("the honest tenant completed nothing");
  report.passed = report.failures.length === 0;
  return report;
}

function p95(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))]!;
}

function sameTotals(a: Totals, b: Totals): boolean {
  return a.prompt_tokens === b.prompt_tokens && a.completion_tokens === b.completion_tokens && Math.abs(a.audio_seconds - b.audio_seconds) < 0.05;
}

async function post(api: string, key: string, path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  try {
    const res = await fetch(`${api}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
  } catch (err) {
    return { status: 0, body: { error: String(err) } };
  }
}

/** Shape B's `status` of `model` in `GET /v1/models`, or undefined. */
async function modelStatus(api: string, key: string, model: string): Promise<string | undefined> {
  const res = await fetch(`${api}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).catch(() => undefined);
  const body = (await res?.json().catch(() => undefined)) as { models?: { id: string; status?: string }[] } | undefined;
  return body?.models?.find((m) => m.id === model)?.status;
}

/** The account's usage over today, asked again until `settled` holds or `waitMs` has passed. */
async function settledUsage(api: string, key: string, settled: (t: Totals) => boolean, waitMs = 10_000): Promise<Totals> {
  const until = Date.now() + waitMs;
  for (;;) {
    const res = await fetch(`${api}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
    const { data } = (await res.json()) as { data: Totals[] };
    const totals = data.reduce(
      (t, r) => ({
        prompt_tokens: t.prompt_tokens + r.prompt_tokens,
        completion_tokens: t.completion_tokens + r.completion_tokens,
        audio_seconds: t.audio_seconds + r.audio_seconds,
      }),
      zero(),
    );
    if (settled(totals) || Date.now() > until) return totals;
    await sleep(250);
  }
}

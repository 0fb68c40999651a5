/**
 * `kiln scheduler`: the control plane. Opens the database, then serves the public HTTP API and the
 * gRPC endpoint agents dial. Ports may be 0: the bound addresses are in the returned handle.
 */
import { resolve } from "node:path";
import { formatHostPort, type HostPort, type SchedulerConfig } from "../config/index.js";
import { schedulerServerCredentials } from "../config/tls.js";
import { Spool } from "./audio/spool.js";
import { listenHttp, uploadTimeoutMs, type HttpListener } from "../core/http/index.js";
import { createLogger, type Logger } from "../core/log.js";
import { KeyService } from "./auth/index.js";
import { catalogPlacement, ModelCatalog, StoreClaims } from "./catalog/index.js";
import { bindFleetServer, createFleetServer, Fleet } from "./fleet/index.js";
import { createHttpApp } from "./http/index.js";
import { HealthImplementation } from "grpc-health-check";
import { AccountSecrets, EgressPolicy, loadSecretsKey, McpService, McpStore } from "./mcp/index.js";
import { createSchedulerMetrics } from "./metrics.js";

/** The fleet service's full name, as gRPC health checks name it. */
export const FLEET_SERVICE = "kiln.v1.Fleet";
import { AUDIO_SECONDS, InflightLimiter, MemoryTokenCounter, RateLimiter, TokenQuota } from "./ratelimit/index.js";
import { RedisLimits } from "./ratelimit/redis.js";
import { openStore } from "./store/index.js";
import { UsageLedger } from "./usage/index.js";

export interface SchedulerHandle {
  http: HostPort;
  grpc: HostPort;
  keys: KeyService;
  fleet: Fleet;
  /** The model catalog it serves (the operator's, shared through the database, or the built-in ids). */
  catalog: ModelCatalog;
  /** Stops accepting work, gives requests in flight `graceMs` (default 0), closes every listener and the database. */
  close(graceMs?: number): Promise<void>;
}

/** What a program embedding the scheduler may set beyond its configuration. */
export interface SchedulerExtras {
  /** Extra `node` arguments for every MCP test's sandbox process (a test suite's socket witness). Default none. */
  mcpSandboxExecArgv?: string[];
}

export async function startScheduler(config: SchedulerConfig, logger: Logger = createLogger("scheduler", config.logLevel), extras: SchedulerExtras = {}): Promise<SchedulerHandle> {
  // The certificate files first: a bad one fails the start before anything is opened.
  const grpcCredentials = schedulerServerCredentials(config, logger);
  const db = await openStore(config.db, { poolSize: config.dbPool, logger });
  const keys = await KeyService.open(db, config.jwtSecret).catch(async (err: unknown) => {
    await db.close();
    throw err;
  });
  // --catalog replaces the stored catalog before anything is served; a stored one that fails its checks fails the start
  const catalog = await ModelCatalog.open({ store: db, ...(config.catalog ? { file: config.catalog } : {}), logger }).catch(async (err: unknown) => {
    await db.close();
    throw err;
  });
  const usage = new UsageLedger(db, { logger });
  // the operator's catalog placed on the nodes that offer their devices (inactive while no catalog is in force)
  const placement = catalogPlacement(catalog, { url: config.hubUrl, ...(config.hfToken ? { token: config.hfToken } : {}) }, new StoreClaims(db));
  // every catalog model sized ahead (its GGUF header read), at start and at each catalog change: a cold request does not wait for it
  const presize = () => {
    for (const model of placement.models())
      placement.size(model).catch((err: unknown) => logger.warn({ model: model.id, err: (err as Error).message }, "a catalog model could not be sized"));
  };
  catalog.onChange(presize);
  presize();
  const fleet = new Fleet({
    placement,
    queueSize: config.queueSize,
    queueTimeoutMs: config.queueTimeout * 1000,
    heartbeatMs: config.heartbeatMs,
    // the same key on every scheduler of one database: an account's prompts share a node's cache through any of them
    cacheScopeKey: keys.derivedKey("cache-scope"),
    logger,
  });
  const grpcServer = createFleetServer({
    fleet,
    nodeTokens: config.nodeTokens,
    maxNodeSlots: config.maxNodeSlots,
    bindCertificates: Boolean(config.grpcClientCa),
    idleTimeoutMs: config.idleTimeout * 1000,
    logger,
  });
  // The standard gRPC health service (grpc.health.v1) beside the fleet service.
  const health = new HealthImplementation({ "": "SERVING", [FLEET_SERVICE]: "SERVING" });
  health.addToServer(grpcServer);
  let http: HttpListener | undefined;
  let redis: RedisLimits | undefined;
  /** --redis: the audio-seconds quotas' counts, under keys of their own. */
  let audioRedis: RedisLimits | undefined;
  try {
    const grpcPort = await bindFleetServer(grpcServer, formatHostPort(config.grpc), grpcCredentials);
    const metrics = createSchedulerMetrics(fleet, { perAccount: config.metricsPerAccount });
    usage.onRecord((row) => metrics.account(row));
    const swept = await Spool.sweep(resolve(config.spoolDir));
    if (swept > 0) logger.info({ spoolDir: config.spoolDir, files: swept }, "removed uploads a previous run left");
    const mcp = new McpService({
      store: new McpStore(db),
      secrets: new AccountSecrets(db, loadSecretsKey(config.secretsKey, config.db)),
      egress: new EgressPolicy({ allow: config.mcpAllowCidr, resolveTimeoutMs: Math.max(500, config.mcpTimeout * 1000 - 500) }),
      stdioServers: config.mcpStdioServers,
      ...(config.mcpFsBase ? { fsBase: config.mcpFsBase } : {}),
      timeoutMs: config.mcpTimeout * 1000,
      concurrency: config.mcpConcurrency,
      totalConcurrency: config.mcpTotalConcurrency,
      sandbox: { memoryBytes: config.mcpSandboxMemory, readBytes: config.mcpReadLimit, ...(extras.mcpSandboxExecArgv ? { execArgv: extras.mcpSandboxExecArgv } : {}) },
      logger,
    });
    const ready = () => {
      const checks: Record<string, boolean> = { store: db.open };
      if (redis) checks.limits = redis.connected && audioRedis?.connected !== false; // --redis: without it every limited request is a 503
      return { ready: Object.values(checks).every(Boolean), checks };
    };
    // with --redis, every scheduler counts the same windows, places and tokens (a Redis that cannot be reached fails the start)
    const usedOn = (account: string, day: string) => usage.tokensOn(account, day);
    if (config.redis) {
      const shared = new RedisLimits({ url: config.redis, usedOn, logger });
      redis = shared;
      await shared.connect();
    }
    const tokens = new TokenQuota({ perMinute: config.tokensPerMinute, perDay: config.tokensPerDay, counter: redis ?? new MemoryTokenCounter({ usedOn }) });
    usage.onRecord((row) => tokens.add(row.account, row.promptTokens + row.completionTokens));
    // transcription's own quotas: the audio seconds each answered transcription was charged (its ledger row), whole seconds
    const audioUsedOn = (account: string, day: string) => usage.audioSecondsOn(account, day);
    if (config.redis) {
      const shared = new RedisLimits({ url: config.redis, prefix: "kiln:audio:", usedOn: audioUsedOn, logger });
      audioRedis = shared;
      await shared.connect();
    }
    const audioQuota = new TokenQuota({
      unit: AUDIO_SECONDS,
      perMinute: config.audioSecondsPerMinute,
      perDay: config.audioSecondsPerDay,
      counter: audioRedis ?? new MemoryTokenCounter({ usedOn: audioUsedOn }),
    });
    usage.onRecord((row) => {
      if (row.audioSeconds > 0) audioQuota.add(row.account, Math.ceil(row.audioSeconds));
    });
    const app = createHttpApp({
      keys,
      limiter: redis ?? new RateLimiter(),
      inflight: redis ?? new InflightLimiter(),
      maxInflight: config.maxInflight,
      fleet,
      catalog,
      usage,
      tokens,
      logger,
      maxBodyBytes: config.maxBody,
      audio: {
        spoolDir: resolve(config.spoolDir),
        maxFileBytes: config.maxAudioUpload,
        maxUploads: config.audioUploads,
        maxUploadsPerAccount: config.audioUploadsPerAccount,
        minFreeBytes: config.spoolMinFree,
        quota: audioQuota,
      },
      defaultMaxTokens: config.defaultMaxTokens,
      standardRpm: config.standardRpm,
      metrics,
      ...(config.metricsToken ? { metricsToken: config.metricsToken } : {}),
      ready,
      corsOrigins: config.corsOrigin,
      mcp,
      ...(config.adminToken ? { adminToken: config.adminToken } : {}),
    });
    // idle: a client that owes bytes and sends none is cut off (never a long answer the scheduler is making)
    http = await listenHttp(app.fetch, config.http, { requestTimeoutMs: uploadTimeoutMs(config.maxAudioUpload), idleTimeoutMs: config.idleTimeout * 1000 });
    const listener = http;
    const handle: SchedulerHandle = {
      http: listener.address,
      grpc: { host: config.grpc.host, port: grpcPort },
      keys,
      fleet,
      catalog,
      async close(graceMs = 0) {
        health.setStatus("", "NOT_SERVING");
        health.setStatus(FLEET_SERVICE, "NOT_SERVING");
        await listener.close(graceMs); // new connections refused; streams in flight may finish
        mcp.close(); // sandboxes of MCP tests still running
        fleet.close();
        catalog.close();
        grpcServer.forceShutdown(); // agent streams never end on their own; agents reconnect
        await usage.close(); // the buffered rows, before the database goes
        await redis?.close();
        await audioRedis?.close();
        await db.close();
      },
    };
    logger.info(
      { http: formatHostPort(handle.http), grpc: formatHostPort(handle.grpc), grpcTls: config.grpcTlsCert ? (config.grpcClientCa ? "mutual" : "server") : "off", db: db.location },
      "scheduler listening",
    );
    return handle;
  } catch (err) {
    fleet.close();
    catalog.close();
    grpcServer.forceShutdown();
    await http?.close();
    await redis?.close();
    await audioRedis?.close();
    await usage.close();
    await db.close();
    throw err;
  }
}

/**
 * `kiln scheduler`: the control plane. Opens the database, then serves the public HTTP API and the
 * gRPC endpoint agents dial. Ports may be 0: the bound addresses are in the returned handle.
 */
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { formatHostPort, type HostPort, type SchedulerConfig } from "../config/index.js";
import { createLogger, type Logger } from "../core/log.js";
import { KeyService } from "./auth/index.js";
import { bindFleetServer, createFleetServer, Fleet } from "./fleet/index.js";
import { createHttpApp } from "./http/index.js";
import { RateLimiter } from "./ratelimit/index.js";
import { openDatabase } from "./store/index.js";

export interface SchedulerHandle {
  http: HostPort;
  grpc: HostPort;
  keys: KeyService;
  fleet: Fleet;
  /** Stops accepting work and closes every listener and the database. */
  close(): Promise<void>;
}

export async function startScheduler(config: SchedulerConfig, logger: Logger = createLogger("scheduler", config.logLevel)): Promise<SchedulerHandle> {
  const db = openDatabase(config.db);
  const keys = new KeyService(db, config.jwtSecret);
  const fleet = new Fleet({ queueSize: config.queueSize, queueTimeoutMs: config.queueTimeout * 1000, heartbeatMs: config.heartbeatMs, logger });
  const grpcServer = createFleetServer({ fleet, nodeTokens: config.nodeTokens, logger });
  let httpServer: Server | undefined; // serve() makes an HTTP/1 server unless told otherwise
  try {
    const grpcPort = await bindFleetServer(grpcServer, formatHostPort(config.grpc));
    const app = createHttpApp({ keys, limiter: new RateLimiter(), fleet, logger, maxBodyBytes: config.maxBody, standardRpm: config.standardRpm });
    const httpPort = await new Promise<number>((resolve, reject) => {
      const server = serve({ fetch: app.fetch, hostname: config.http.host, port: config.http.port }, (info: AddressInfo) => resolve(info.port)) as Server;
      httpServer = server;
      server.once("error", reject);
    });
    const handle: SchedulerHandle = {
      http: { host: config.http.host, port: httpPort },
      grpc: { host: config.grpc.host, port: grpcPort },
      keys,
      fleet,
      async close() {
        fleet.close();
        grpcServer.forceShutdown(); // agent streams never end on their own; agents reconnect
        await new Promise<void>((resolve) => {
          httpServer?.close(() => resolve());
          httpServer?.closeAllConnections();
        });
        db.close();
      },
    };
    logger.info({ http: formatHostPort(handle.http), grpc: formatHostPort(handle.grpc), db: config.db }, "scheduler listening");
    return handle;
  } catch (err) {
    fleet.close();
    grpcServer.forceShutdown();
    httpServer?.close();
    db.close();
    throw err;
  }
}

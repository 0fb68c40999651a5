/**
 * `/v1/audio`'s spool against a disk that fills while an upload arrives: the route over a real Node
 * server, on a disk of the test's own (its free bytes shrink as the spool grows), with no agent (the
 * upload is refused before the form ends, so none is asked).
 */
import { readdirSync, statSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onError, requestId, listenHttp, type HttpListener } from "../../../core/http/index.js";
import { createLogger } from "../../../core/log.js";
import { Fleet } from "../../fleet/index.js";
import { InflightLimiter } from "../../ratelimit/index.js";
import type { UsageLedger } from "../../usage/index.js";
import type { AppEnv } from "../env.js";
import { audioRoutes, SPOOL_CHECK_BYTES } from "./audio.js";
import { tempDir } from "../../../test/helpers/temp.js";

const MiB = 1024 ** 2;
const FLOOR = 64 * MiB;
/** What the test's disk has above the floor before the upload: room for a few checks' worth. */
const ROOM = 3 * SPOOL_CHECK_BYTES;

const spoolDir = tempDir();
const spooled = () => readdirSync(spoolDir).reduce((n, f) => n + statSync(join(spoolDir, f)).size, 0);
const logger = createLogger("test", "silent");
const fleet = new Fleet({ queueSize: 1, queueTimeoutMs: 1000, heartbeatMs: 60_000, logger });
let server: HttpListener;
let asked = 0;
let largest = 0; // the most the spool held when the disk was asked

beforeAll(async () => {
  const app = new Hono<AppEnv>();
  app.onError(onError(logger));
  app.use("*", requestId());
  app.use("*", async (c, next) => {
    c.set("identity", { keyId: "k", account: "a", tier: "pro", rpm: null });
    await next();
  });
  app.route(
    "/v1/audio",
    audioRoutes({
      fleet,
      usage: { record: () => undefined } as unknown as UsageLedger,
      spoolDir,
      maxFileBytes: 1024 * MiB,
      maxUploads: 4,
      maxUploadsPerAccount: 4,
      minFreeBytes: FLOOR,
      // a disk with ROOM above the floor before the upload, less whatever the spool holds
      freeBytes: async () => {
        asked++;
        largest = Math.max(largest, spooled());
        return FLOOR + ROOM - spooled();
      },
      cap: { inflight: new InflightLimiter(), maxInflight: { free: 4, standard: 4, pro: 4, enterprise: 4 } },
      logger,
    }),
  );
  server = await listenHttp(app.fetch, { host: "127.0.0.1", port: 0 });
});
afterAll(async () => {
  await server?.close();
  fleet.close();
});

/** A multipart upload sent chunked (no Content-Length), a MiB a write, until the answer comes or `total` is sent. */
function chunkedUpload(total: number): Promise<{ status: number; body: string; sent: number }> {
  return new Promise((resolve, reject) => {
    const boundary = "kiln-test-boundary";
    let sent = 0;
    let answered = false;
    const req = request(
      { host: "127.0.0.1", port: server.address.port, path: "/v1/audio/transcriptions", method: "POST", headers: { "content-type": `multipart/form-data; boundary=${boundary}` } },
      (res) => {
        answered = true;
        let body = "";
        res.setEncoding("utf8").on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, sent }));
      },
    );
    req.on("error", (err) => (answered ? undefined : reject(err)));
    req.write(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`);
    const chunk = Buffer.alloc(MiB, 1);
    const next = (): void => {
      if (answered || req.destroyed) return;
      if (sent >= total) {
        req.end(`\r\n--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--${boundary}--\r\n`);
        return;
      }
      sent += chunk.length;
      if (req.write(chunk)) setImmediate(next);
      else req.once("drain", next);
    };
    next();
  });
}

describe("the audio spool's free-disk floor", () => {
  it("stops a chunked upload with 507 in the API's shape once the disk reaches the floor, and leaves no file behind", async () => {
    const res = await chunkedUpload(64 * MiB);
    expect(res.status).toBe(507);
    expect(JSON.parse(res.body).error).toMatchObject({ type: "service_unavailable_error", code: "insufficient_storage", message: expect.stringMatching(/^file:/) });
    expect(asked).toBeGreaterThan(1); // asked again as the bytes came, not only before the first
    expect(largest).toBeGreaterThanOrEqual(ROOM); // it went on while the disk had room …
    expect(largest).toBeLessThan(ROOM + 2 * SPOOL_CHECK_BYTES); // … and stopped within a check of the floor, not at the end
    expect(readdirSync(spoolDir)).toEqual([]); // the partial spool file is gone
  });
});

/** API keys (JWT, checked by signature and active key id) and per-account tier rate limits. */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessScheduler, tempDir } from "./helpers/fleet.js";
import { testDb } from "./helpers/db.js";

let scheduler: SchedulerHandle;
let base: string;

beforeAll(async () => {
  scheduler = await inProcessScheduler();
  base = httpBase(scheduler);
});
afterAll(() => scheduler?.close());

const models = (authorization?: string) => fetch(`${base}/v1/models`, { headers: authorization === undefined ? {} : { authorization } });

async function expect401(res: Response, code: string): Promise<void> {
  expect(res.status).toBe(401);
  expect(((await res.json()) as { error: unknown }).error).toEqual({ type: "authentication_error", code, message: expect.stringMatching(/^Authorization:/), param: null });
}

describe("401 authentication_error", () => {
  it("missing header", async () => expect401(await models(), "missing_api_key"));

  it("wrong scheme, or extra spaces", async () => {
    const { token } = await scheduler.keys.create({ account: "a", tier: "free" });
    await expect401(await models(`Basic ${token}`), "invalid_auth_scheme");
    await expect401(await models(`Bearer  ${token}`), "invalid_auth_scheme");
    expect((await models(`Bearer ${token}`)).status).toBe(200);
  });

  it("wrong signature", async () => {
    const forged = await new SignJWT({ tier: "enterprise" })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuer("kiln")
      .setSubject("mallory")
      .setJti("key_x")
      .sign(new TextEncoder().encode("not-the-scheduler-secret-0123456789abcdef"));
    await expect401(await models(`Bearer ${forged}`), "invalid_api_key");
    await expect401(await models("Bearer not.a.jwt"), "invalid_api_key");
  });

  it("a key is case-sensitive", async () => {
    const { token } = await scheduler.keys.create({ account: "a", tier: "free" });
    const flipped = token.slice(0, -1) + (token.at(-1) === "A" ? "B" : "A");
    await expect401(await models(`Bearer ${flipped}`), "invalid_api_key");
  });

  it("expired", async () => {
    const { token } = await scheduler.keys.create({ account: "a", tier: "free", expiresInSeconds: 1 });
    expect((await models(`Bearer ${token}`)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2100));
    await expect401(await models(`Bearer ${token}`), "expired_api_key");
  });

  it("revoked", async () => {
    const { id, token } = await scheduler.keys.create({ account: "a", tier: "free" });
    expect((await models(`Bearer ${token}`)).status).toBe(200);
    expect(await scheduler.keys.revoke(id)).toBe(true);
    await expect401(await models(`Bearer ${token}`), "revoked_api_key");
  });

  it("revoked by `kiln keys revoke` in another process, on the scheduler's database: refused at the next request", async () => {
    const db = testDb();
    const other = await inProcessScheduler({ db });
    try {
      const { id, token } = await other.keys.create({ account: "c", tier: "free" });
      const list = () => fetch(`${httpBase(other)}/v1/models`, { headers: { authorization: `Bearer ${token}` } });
      for (let i = 0; i < 2; i++) expect((await list()).status).toBe(200); // verified once, then remembered
      const { stdout } = await promisify(execFile)(process.execPath, [resolve("bin/kiln.js"), "keys", "revoke", "--db", db, id]);
      expect(stdout).toContain(`revoked ${id}`);
      await expect401(await list(), "revoked_api_key");
    } finally {
      await other.close();
    }
  });

  it("keys are stored hashed, never in clear", async () => {
    const db = join(tempDir(), "keys.db");
    const own = await inProcessScheduler({ db });
    try {
      const { id, token } = await own.keys.create({ account: "b", tier: "pro" });
      expect(JSON.stringify(await own.keys.list())).not.toContain(token);
      // What is on disk: the SHA-256 of the token in its row, and the token nowhere (database and WAL).
      const stored = new Database(db, { readonly: true });
      try {
        expect(stored.prepare("SELECT token_sha256 FROM api_keys WHERE id = ?").get(id)).toEqual({ token_sha256: createHash("sha256").update(token).digest("hex") });
      } finally {
        stored.close();
      }
      const signature = token.split(".")[2]!;
      const bytes = Buffer.concat([db, `${db}-wal`].filter(existsSync).map((f) => readFileSync(f)));
      expect(bytes.includes(token)).toBe(false);
      expect(bytes.includes(signature)).toBe(false);
    } finally {
      await own.close();
    }
  });
});

describe("rate limits", () => {
  it("the free tier's 101st request in a minute → 429 with Retry-After; headers count down", async () => {
    const { token } = await scheduler.keys.create({ account: "free-co", tier: "free" });
    let last: Response | undefined;
    for (let i = 1; i <= 100; i++) {
      last = await models(`Bearer ${token}`);
      expect(last.status).toBe(200);
      await last.arrayBuffer();
    }
    expect(last!.headers.get("x-ratelimit-limit-requests")).toBe("100");
    expect(last!.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(last!.headers.get("x-ratelimit-reset-requests")).toMatch(/^\d+s$/);
    const limited = await models(`Bearer ${token}`);
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(((await limited.json()) as { error: unknown }).error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" });
    // Limits count per account: another key of the same account shares the spent limit; another account is unaffected.
    const sameAccount = await scheduler.keys.create({ account: "free-co", tier: "free" });
    expect((await models(`Bearer ${sameAccount.token}`)).status).toBe(429);
    const other = await scheduler.keys.create({ account: "free-co-2", tier: "free" });
    expect((await models(`Bearer ${other.token}`)).status).toBe(200);
  });

  it("pro gets 1000 per minute; enterprise its own figure", async () => {
    const pro = await scheduler.keys.create({ account: "pro-co", tier: "pro" });
    expect((await models(`Bearer ${pro.token}`)).headers.get("x-ratelimit-limit-requests")).toBe("1000");
    const ent = await scheduler.keys.create({ account: "big-co", tier: "enterprise", rpm: 5000 });
    expect((await models(`Bearer ${ent.token}`)).headers.get("x-ratelimit-limit-requests")).toBe("5000");
    await expect(scheduler.keys.create({ account: "big-co", tier: "enterprise" })).rejects.toThrow(/rpm/);
  });
});

/** KeyService on a real database (SQLite; PostgreSQL in `npm run test:postgres`): issuing, verifying, revoking and expiring keys; the account's tier. */
import { createHash, webcrypto } from "node:crypto";
import { SignJWT } from "jose";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { testDb } from "../../test/helpers/db.js";
import { until } from "../../scripts/lib/run.js";
import { openStore, type Store } from "../store/index.js";
import { createLogger } from "../../core/log.js";
import { KeyService } from "./keys.js";
import { requestsPerMinute, tierAtLeast, isTier } from "./tiers.js";
import { ACCOUNT_NAME_RULE, isValidAccountName } from "./account-name.js";

let db: Store;
/** Where `db` is: another connection opens it again. */
let dbUrl: string;
let keys: KeyService;
const open = (url = testDb()) => openStore(url, { logger: createLogger("test", "silent") });
beforeEach(async () => {
  db = await open((dbUrl = testDb()));
  keys = await KeyService.open(db, "a-signing-secret-of-at-least-32-characters");
});
afterEach(async () => {
  vi.useRealTimers();
  await db.close();
});

const bearer = (token: string) => `Bearer ${token}`;

describe("KeyService", () => {
  it("issues a JWT whose hash alone is stored, and verifies it to its account and tier", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "pro" });
    expect(id).toMatch(/^key_/);
    expect(token.split(".")).toHaveLength(3);
    expect(await db.get("SELECT token_sha256 FROM api_keys WHERE id = ?", [id])).toEqual({ token_sha256: createHash("sha256").update(token).digest("hex") });
    expect(await keys.authenticate(bearer(token))).toMatchObject({ keyId: id, account: "acme", tier: "pro", rpm: null, revokedAt: null, expiresAt: null });
    // Again, from what it remembers: the same identity.
    expect(await keys.authenticate(bearer(token))).toMatchObject({ keyId: id, account: "acme", tier: "pro" });
  });

  it.each([
    [undefined, "missing_api_key"],
    ["", "missing_api_key"],
    ["Basic abc", "invalid_auth_scheme"],
    ["Bearer  two-spaces", "invalid_auth_scheme"],
    ["Bearer a b", "invalid_auth_scheme"],
    ["xBearer abc", "invalid_auth_scheme"],
    ["bearer abc", "invalid_auth_scheme"],
    ["Bearer not-a-jwt", "invalid_api_key"],
  ])("refuses the header %j with %s", async (header, code) => {
    await expect(keys.authenticate(header)).rejects.toMatchObject({ status: 401, code, message: expect.stringMatching(/^Authorization:/) });
  });

  it("refuses a token signed with another secret, with another issuer, or unknown to the database", async () => {
    const { token } = await keys.create({ account: "acme", tier: "pro" });
    const otherDb = await open();
    const other = await KeyService.open(otherDb, "another-signing-secret-of-32-characters!");
    const foreign = (await other.create({ account: "acme", tier: "pro" })).token;
    await otherDb.close();
    await expect(keys.authenticate(bearer(foreign))).rejects.toMatchObject({
      code: "invalid_api_key",
      message: "Authorization: the API key is not valid (bad format or signature)",
    });
    const secret = new TextEncoder().encode("a-signing-secret-of-at-least-32-characters");
    const wrongIssuer = await new SignJWT({}).setProtectedHeader({ alg: "HS256" }).setIssuer("not-kiln").setJti("key_x").sign(secret);
    await expect(keys.authenticate(bearer(wrongIssuer))).rejects.toMatchObject({
      code: "invalid_api_key",
      message: "Authorization: the API key is not valid (bad format or signature)",
    });
    const otherAlgorithm = await new SignJWT({})
      .setProtectedHeader({ alg: "HS512" })
      .setIssuer("kiln")
      .setJti((await keys.list())[0]!.keyId)
      .sign(secret);
    await expect(keys.authenticate(bearer(otherAlgorithm))).rejects.toMatchObject({
      code: "invalid_api_key",
      message: "Authorization: the API key is not valid (bad format or signature)",
    });
    const unknownId = await new SignJWT({}).setProtectedHeader({ alg: "HS256" }).setIssuer("kiln").setJti("key_unknown").sign(secret);
    await expect(keys.authenticate(bearer(unknownId))).rejects.toMatchObject({ code: "invalid_api_key", message: "Authorization: the API key is not known to this service" });
    // Same id, another token (a forged twin with the right secret but not the stored one).
    const id = (await keys.list())[0]!.keyId;
    const twin = await new SignJWT({ extra: 1 }).setProtectedHeader({ alg: "HS256" }).setIssuer("kiln").setJti(id).sign(secret);
    await expect(keys.authenticate(bearer(twin))).rejects.toMatchObject({ code: "invalid_api_key" });
    expect((await keys.authenticate(bearer(token))).account).toBe("acme");
  });

  it("a revoked key is refused at once, even when remembered; revoking twice says so", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "standard" });
    await keys.authenticate(bearer(token));
    expect(await keys.revoke(id)).toBe(true);
    expect(await keys.revoke(id)).toBe(false);
    expect(await keys.revoke("key_nope")).toBe(false);
    await expect(keys.authenticate(bearer(token))).rejects.toMatchObject({ code: "revoked_api_key", message: "Authorization: this API key has been revoked" });
    expect((await keys.list())[0]!.revokedAt).toEqual(expect.any(Number));
  });

  it("an expired key is refused, whether first seen or remembered", async () => {
    // The clock is fixed from the key's creation: with the real one, a second boundary crossed
    // between creating the key and reading the time would make "59 s later" already expired.
    const start = 1_800_000_000_000;
    vi.useFakeTimers({ now: start, toFake: ["Date"] });
    const { token } = await keys.create({ account: "acme", tier: "pro", expiresInSeconds: 60 });
    expect((await keys.authenticate(bearer(token))).account).toBe("acme");
    expect((await keys.list())[0]!.expiresAt).toBe(start / 1000 + 60);
    const expired = { code: "expired_api_key", message: "Authorization: this API key has expired" };
    vi.setSystemTime(start + 59_000);
    expect((await keys.authenticate(bearer(token))).account).toBe("acme"); // remembered, not yet expired
    vi.setSystemTime(start + 61_000);
    await expect(keys.authenticate(bearer(token))).rejects.toMatchObject(expired); // remembered, now expired
    const fresh = await KeyService.open(db, "a-signing-secret-of-at-least-32-characters");
    await expect(fresh.authenticate(bearer(token))).rejects.toMatchObject(expired); // first seen, expired
  });

  it("a key follows its account's current tier and rpm", async () => {
    const { token } = await keys.create({ account: "acme", tier: "standard" });
    expect((await keys.authenticate(bearer(token))).tier).toBe("standard");
    await keys.create({ account: "acme", tier: "enterprise", rpm: 7 });
    expect(await keys.authenticate(bearer(token))).toMatchObject({ tier: "enterprise", rpm: 7 });
    expect((await keys.list()).map((k) => [k.tier, k.rpm])).toEqual([
      ["enterprise", 7],
      ["enterprise", 7],
    ]);
  });

  it("refuses an account that is not a plain folder name, and enterprise without rpm", async () => {
    await expect(keys.create({ account: "../x", tier: "pro" })).rejects.toMatchObject({
      status: 400,
      code: "invalid_account",
      message: `account: ${ACCOUNT_NAME_RULE} (got "../x")`,
    });
    await expect(keys.create({ account: "acme", tier: "enterprise" })).rejects.toThrow(/^rpm: enterprise accounts need/);
    expect(await keys.list()).toEqual([]);
  });

  it("generates a signing secret once and keeps it in the database", async () => {
    const a = await KeyService.open(db);
    const { token } = await a.create({ account: "acme", tier: "pro" });
    expect((await (await KeyService.open(db)).authenticate(bearer(token))).account).toBe("acme");
    expect((await db.get<{ value: string }>("SELECT value FROM settings WHERE name = 'jwt_secret'"))!.value).toMatch(/^[\w-]{43}$/);
  });

  it("a key carries its tier in a signed HS256 JWT, and its revocation time is now", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "pro" });
    const [header, payload] = token
      .split(".")
      .slice(0, 2)
      .map((p) => JSON.parse(Buffer.from(p!, "base64url").toString()));
    expect(header).toEqual({ alg: "HS256", typ: "JWT" });
    expect(payload).toMatchObject({ tier: "pro", iss: "kiln", sub: "acme", jti: id });
    await keys.revoke(id);
    expect(Math.abs((await keys.list())[0]!.revokedAt! - Date.now() / 1000)).toBeLessThan(5);
  });

  it("a key whose row is gone is refused, even when remembered", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "pro" });
    await keys.authenticate(bearer(token));
    await db.run("DELETE FROM api_keys WHERE id = ?", [id]);
    await expect(keys.authenticate(bearer(token))).rejects.toMatchObject({ code: "invalid_api_key", message: "Authorization: the API key is not known to this service" });
  });
});

describe("KeyService, what it remembers", () => {
  it("verifies a token's signature once: a remembered token only has its row read again; the HMAC key is imported once, not extractable", async () => {
    const { token } = await keys.create({ account: "acme", tier: "pro" });
    const { token: second } = await keys.create({ account: "acme", tier: "pro" });
    const verify = vi.spyOn(webcrypto.subtle, "verify");
    const importKey = vi.spyOn(webcrypto.subtle, "importKey");
    try {
      await keys.authenticate(bearer(token));
      expect(verify).toHaveBeenCalledTimes(1);
      expect((await keys.authenticate(bearer(token))).account).toBe("acme");
      expect(verify).toHaveBeenCalledTimes(1); // remembered
      await keys.authenticate(bearer(second));
      expect(verify).toHaveBeenCalledTimes(2);
      expect(importKey).toHaveBeenCalledTimes(1);
      expect(importKey).toHaveBeenCalledWith("raw", expect.any(Uint8Array), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
    } finally {
      verify.mockRestore();
      importKey.mockRestore();
    }
  });

  it("a remembered key expires at exactly its exp second", async () => {
    const start = 1_800_000_000_000; // a whole second
    vi.useFakeTimers({ now: start, toFake: ["Date"] });
    const { token } = await keys.create({ account: "acme", tier: "pro", expiresInSeconds: 60 });
    await keys.authenticate(bearer(token));
    vi.setSystemTime(start + 59_999);
    expect((await keys.authenticate(bearer(token))).account).toBe("acme");
    vi.setSystemTime(start + 60_000);
    await expect(keys.authenticate(bearer(token))).rejects.toMatchObject({ code: "expired_api_key" });
    await expect((await KeyService.open(db, "a-signing-secret-of-at-least-32-characters")).authenticate(bearer(token))).rejects.toMatchObject({ code: "expired_api_key" }); // as jose has it
  });

  it("a remembered key's row is not read again while the store has not changed; a revocation from another connection is refused from the next turn of the event loop (SQLite), or once its notification has come (PostgreSQL)", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "pro" });
    if (db.dialect === "postgres") {
      // the key's creation is notified too, a few ms after its commit: the count settles first
      for (let count = db.changeCount!(); ;) {
        await new Promise((r) => setTimeout(r, 100));
        if (db.changeCount!() === count) break;
        count = db.changeCount!();
      }
    }
    await keys.authenticate(bearer(token));
    const get = vi.spyOn(db, "get");
    try {
      expect((await keys.authenticate(bearer(token))).account).toBe("acme");
      expect(get).toHaveBeenCalledTimes(0);
      // as `kiln keys revoke` does from another process: another connection to the same database
      const other = await open(dbUrl);
      const before = db.changeCount!();
      try {
        expect(await (await KeyService.open(other, "a-signing-secret-of-at-least-32-characters")).revoke(id)).toBe(true);
      } finally {
        await other.close();
      }
      await new Promise(setImmediate); // a request from a socket comes in a later turn
      if (db.dialect === "postgres") await until(() => db.changeCount!() !== before, 5000, "the revocation's notification");
      await expect(keys.authenticate(bearer(token))).rejects.toMatchObject({ code: "revoked_api_key" });
    } finally {
      get.mockRestore();
    }
  });

  it("a remembered key's account re-tiered through this store is seen at the next request", async () => {
    const { token } = await keys.create({ account: "acme", tier: "free" });
    expect((await keys.authenticate(bearer(token))).tier).toBe("free");
    expect((await keys.authenticate(bearer(token))).tier).toBe("free");
    await db.run("UPDATE accounts SET tier = 'pro' WHERE name = 'acme'");
    expect((await keys.authenticate(bearer(token))).tier).toBe("pro");
  });

  it("remembers at most 10000 tokens, forgetting the oldest first", async () => {
    const secret = await webcrypto.subtle.importKey("raw", new TextEncoder().encode("a-signing-secret-of-at-least-32-characters"), { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
    ]);
    const tokens = await Promise.all(
      Array.from({ length: 10_001 }, (_, i) => new SignJWT({ tier: "free" }).setProtectedHeader({ alg: "HS256" }).setIssuer("kiln").setJti(`key_${i}`).sign(secret)),
    );
    await db.run("INSERT INTO accounts (name, tier, rpm, created_at) VALUES ('acme', 'free', NULL, 0)");
    await db.transaction(async (tx) => {
      for (const [i, t] of tokens.entries())
        await tx.run("INSERT INTO api_keys (id, account, tier, rpm, token_sha256, created_at) VALUES (?, 'acme', 'free', NULL, ?, 0)", [
          `key_${i}`,
          createHash("sha256").update(t).digest("hex"),
        ]);
    });
    await keys.authenticate(bearer(tokens[0]!));
    await Promise.all(tokens.slice(1, 10_000).map((t) => keys.authenticate(bearer(t))));
    await keys.authenticate(bearer(tokens[10_000]!)); // the 10001st pushes out the first
    const verify = vi.spyOn(webcrypto.subtle, "verify");
    try {
      await keys.authenticate(bearer(tokens[1]!));
      await keys.authenticate(bearer(tokens[10_000]!));
      expect(verify).toHaveBeenCalledTimes(0); // still remembered
      expect((await keys.authenticate(bearer(tokens[0]!))).keyId).toBe("key_0");
      expect(verify).toHaveBeenCalledTimes(1); // forgotten: verified again
    } finally {
      verify.mockRestore();
    }
  });

  it("a key row with a tier it does not know (a hand-edited database, its account gone) counts as free", async () => {
    // the hand edit: the foreign key off (SQLite) or dropped (PostgreSQL)
    await db.run(db.dialect === "sqlite" ? "PRAGMA foreign_keys = OFF" : "ALTER TABLE api_keys DROP CONSTRAINT api_keys_account_fkey");
    await db.run("INSERT INTO api_keys (id, account, tier, rpm, token_sha256, created_at) VALUES ('key_hand', 'ghost', 'gold', NULL, 'x', 0)");
    expect(await keys.list()).toMatchObject([{ keyId: "key_hand", account: "ghost", tier: "free" }]);
  });
});

describe("account names", () => {
  it("are plain folder names: 1–64 of letters, digits, _ . @ -, not starting with .", () => {
    for (const ok of ["acme", "a", "A9", "x_y-z", "user@example.com", "a.b", "-a", "@x", "x".repeat(64)]) expect(isValidAccountName(ok), ok).toBe(true);
    for (const bad of ["", ".", "..", ".hidden", "a/b", "a\\b", "a b", "x".repeat(65), "a\0", null, 123, undefined]) expect(isValidAccountName(bad), String(bad)).toBe(false);
  });
});

describe("tiers", () => {
  it("orders free < standard < pro < enterprise", () => {
    expect(tierAtLeast("standard", "standard")).toBe(true);
    expect(tierAtLeast("pro", "standard")).toBe(true);
    expect(tierAtLeast("free", "standard")).toBe(false);
    expect(tierAtLeast("enterprise", "pro")).toBe(true);
    expect(tierAtLeast("standard", "pro")).toBe(false);
    expect(isTier("pro")).toBe(true);
    expect(isTier("gold")).toBe(false);
  });

  it("gives each tier its requests per minute, and an account's own figure first", () => {
    expect(requestsPerMinute("free", null, 50)).toBe(100);
    expect(requestsPerMinute("standard", null, 50)).toBe(50);
    expect(requestsPerMinute("pro", null, 50)).toBe(1000);
    expect(requestsPerMinute("enterprise", null, 50)).toBe(1000);
    expect(requestsPerMinute("free", 7, 50)).toBe(7);
  });
});

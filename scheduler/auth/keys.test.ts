/** KeyService on a real SQLite database: issuing, verifying, revoking and expiring keys; the account's tier. */
import { createHash } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT } from "jose";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { openSchedulerDatabase, type Db } from "../store/index.js";
import { KeyService } from "./keys.js";
import { requestsPerMinute, tierAtLeast, isTier } from "./tiers.js";
import { ACCOUNT_NAME_RULE, isValidAccountName } from "./account-name.js";

let db: Db;
let keys: KeyService;
beforeEach(() => {
  db = openSchedulerDatabase(join(mkdtempSync(join(tmpdir(), "kiln-keys-")), "k.db"));
  keys = new KeyService(db, "a-signing-secret-of-at-least-32-characters");
});
afterEach(() => { vi.useRealTimers(); db.close(); });

const bearer = (token: string) => `Bearer ${token}`;

describe("KeyService", () => {
  it("issues a JWT whose hash alone is stored, and verifies it to its account and tier", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "pro" });
    expect(id).toMatch(/^key_/);
    expect(token.split(".")).toHaveLength(3);
    expect(db.prepare("SELECT token_sha256 FROM api_keys WHERE id = ?").get(id)).toEqual({ token_sha256: createHash("sha256").update(token).digest("hex") });
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
    const other = new KeyService(openSchedulerDatabase(join(mkdtempSync(join(tmpdir(), "kiln-keys-")), "o.db")), "another-signing-secret-of-32-characters!");
    const foreign = (await other.create({ account: "acme", tier: "pro" })).token;
    await expect(keys.authenticate(bearer(foreign))).rejects.toMatchObject({ code: "invalid_api_key", message: "Authorization: the API key is not valid (bad format or signature)" });
    const secret = new TextEncoder().encode("a-signing-secret-of-at-least-32-characters");
    const wrongIssuer = await new SignJWT({}).setProtectedHeader({ alg: "HS256" }).setIssuer("not-kiln").setJti("key_x").sign(secret);
    await expect(keys.authenticate(bearer(wrongIssuer))).rejects.toMatchObject({ code: "invalid_api_key", message: "Authorization: the API key is not valid (bad format or signature)" });
    const otherAlgorithm = await new SignJWT({}).setProtectedHeader({ alg: "HS512" }).setIssuer("kiln").setJti(keys.list()[0]!.keyId).sign(secret);
    await expect(keys.authenticate(bearer(otherAlgorithm))).rejects.toMatchObject({ code: "invalid_api_key", message: "Authorization: the API key is not valid (bad format or signature)" });
    const unknownId = await new SignJWT({}).setProtectedHeader({ alg: "HS256" }).setIssuer("kiln").setJti("key_unknown").sign(secret);
    await expect(keys.authenticate(bearer(unknownId))).rejects.toMatchObject({ code: "invalid_api_key", message: "Authorization: the API key is not known to this service" });
    // Same id, another token (a forged twin with the right secret but not the stored one).
    const id = keys.list()[0]!.keyId;
    const twin = await new SignJWT({ extra: 1 }).setProtectedHeader({ alg: "HS256" }).setIssuer("kiln").setJti(id).sign(secret);
    await expect(keys.authenticate(bearer(twin))).rejects.toMatchObject({ code: "invalid_api_key" });
    expect((await keys.authenticate(bearer(token))).account).toBe("acme");
  });

  it("a revoked key is refused at once, even when remembered; revoking twice says so", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "standard" });
    await keys.authenticate(bearer(token));
    expect(keys.revoke(id)).toBe(true);
    expect(keys.revoke(id)).toBe(false);
    expect(keys.revoke("key_nope")).toBe(false);
    await expect(keys.authenticate(bearer(token))).rejects.toMatchObject({ code: "revoked_api_key", message: "Authorization: this API key has been revoked" });
    expect(keys.list()[0]!.revokedAt).toEqual(expect.any(Number));
  });

  it("an expired key is refused, whether first seen or remembered", async () => {
    const { token } = await keys.create({ account: "acme", tier: "pro", expiresInSeconds: 60 });
    expect((await keys.authenticate(bearer(token))).account).toBe("acme");
    expect(keys.list()[0]!.expiresAt).toEqual(expect.any(Number));
    const expired = { code: "expired_api_key", message: "Authorization: this API key has expired" };
    const start = Date.now();
    vi.useFakeTimers({ now: start + 59_000, toFake: ["Date"] });
    expect((await keys.authenticate(bearer(token))).account).toBe("acme"); // remembered, not yet expired
    vi.setSystemTime(start + 61_000);
    await expect(keys.authenticate(bearer(token))).rejects.toMatchObject(expired); // remembered, now expired
    const fresh = new KeyService(db, "a-signing-secret-of-at-least-32-characters");
    await expect(fresh.authenticate(bearer(token))).rejects.toMatchObject(expired); // first seen, expired
  });

  it("a key follows its account's current tier and rpm", async () => {
    const { token } = await keys.create({ account: "acme", tier: "standard" });
    expect((await keys.authenticate(bearer(token))).tier).toBe("standard");
    await keys.create({ account: "acme", tier: "enterprise", rpm: 7 });
    expect(await keys.authenticate(bearer(token))).toMatchObject({ tier: "enterprise", rpm: 7 });
    expect(keys.list().map((k) => [k.tier, k.rpm])).toEqual([["enterprise", 7], ["enterprise", 7]]);
  });

  it("refuses an account that is not a plain folder name, and enterprise without rpm", async () => {
    await expect(keys.create({ account: "../x", tier: "pro" })).rejects.toMatchObject({ status: 400, code: "invalid_account", message: `account: ${ACCOUNT_NAME_RULE} (got "../x")` });
    await expect(keys.create({ account: "acme", tier: "enterprise" })).rejects.toThrow(/^rpm: enterprise accounts need/);
    expect(keys.list()).toEqual([]);
  });

  it("generates a signing secret once and keeps it in the database", async () => {
    const a = new KeyService(db);
    const { token } = await a.create({ account: "acme", tier: "pro" });
    expect((await new KeyService(db).authenticate(bearer(token))).account).toBe("acme");
    expect((db.prepare("SELECT value FROM settings WHERE name = 'jwt_secret'").get() as { value: string }).value).toMatch(/^[\w-]{43}$/);
  });

  it("a key carries its tier in a signed HS256 JWT, and its revocation time is now", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "pro" });
    const [header, payload] = token.split(".").slice(0, 2).map((p) => JSON.parse(Buffer.from(p!, "base64url").toString()));
    expect(header).toEqual({ alg: "HS256", typ: "JWT" });
    expect(payload).toMatchObject({ tier: "pro", iss: "kiln", sub: "acme", jti: id });
    keys.revoke(id);
    expect(Math.abs(keys.list()[0]!.revokedAt! - Date.now() / 1000)).toBeLessThan(5);
  });

  it("a key whose row is gone is refused, even when remembered", async () => {
    const { id, token } = await keys.create({ account: "acme", tier: "pro" });
    await keys.authenticate(bearer(token));
    db.prepare("DELETE FROM api_keys WHERE id = ?").run(id);
    await expect(keys.authenticate(bearer(token))).rejects.toMatchObject({ code: "invalid_api_key", message: "Authorization: the API key is not known to this service" });
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

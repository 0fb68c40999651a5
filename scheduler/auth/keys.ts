/**
 * API keys: JWTs (HS256) signed by the scheduler. A key is accepted when its signature verifies,
 * it has not expired, and its key id (`jti`) is still active in the database with the same token
 * hash. Tokens are shown once at creation and stored only as SHA-256.
 */
import { createHash, randomBytes, webcrypto } from "node:crypto";
import { SignJWT, jwtVerify, errors as joseErrors } from "jose";
import { AuthenticationError } from "../../core/errors.js";
import { ensureSetting, type Db } from "../store/index.js";
import { isTier, type Tier } from "./tiers.js";

const ISSUER = "kiln";

/** What a verified key grants. */
export interface KeyIdentity {
  keyId: string;
  account: string;
  tier: Tier;
  /** The key's own requests-per-minute figure, when it has one. */
  rpm: number | null;
}

export interface KeyRecord extends KeyIdentity {
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
}

export interface CreateKeyOptions {
  account: string;
  tier: Tier;
  /** Requests per minute for this account; required for enterprise. */
  rpm?: number;
  /** Lifetime in seconds; no expiry when unset. */
  expiresInSeconds?: number;
}

const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

interface KeyRow { id: string; account: string; tier: string; rpm: number | null; token_sha256: string; created_at: number; expires_at: number | null; revoked_at: number | null }

export class KeyService {
  private readonly secret: Uint8Array;
  /** The secret imported once as an HMAC key: verifying with raw bytes would import it on every request. */
  private verifyKey: Promise<webcrypto.CryptoKey> | undefined;

  /** @param jwtSecret signing secret; when unset, one is generated once and kept in the database. */
  constructor(private readonly db: Db, jwtSecret?: string) {
    const secret = jwtSecret ?? ensureSetting(db, "jwt_secret", randomBytes(32).toString("base64url"));
    this.secret = new TextEncoder().encode(secret);
  }

  /** Creates (or re-tiers) the account and issues a key; the token is returned only here. */
  async create(options: CreateKeyOptions): Promise<{ id: string; token: string }> {
    if (!options.account.trim()) throw new Error("account: must not be empty");
    if (options.tier === "enterprise" && options.rpm === undefined) throw new Error("rpm: enterprise accounts need their own requests-per-minute figure (--rpm)");
    const id = `key_${randomBytes(9).toString("base64url")}`;
    const now = Math.floor(Date.now() / 1000);
    const expiresAt = options.expiresInSeconds !== undefined ? now + options.expiresInSeconds : null;
    const jwt = new SignJWT({ tier: options.tier }).setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setIssuer(ISSUER).setSubject(options.account).setJti(id).setIssuedAt(now);
    if (expiresAt !== null) jwt.setExpirationTime(expiresAt);
    const token = await jwt.sign(this.secret);
    const rpm = options.rpm ?? null;
    this.db.transaction(() => {
      this.db.prepare(`INSERT INTO accounts (name, tier, rpm, created_at) VALUES (?, ?, ?, ?)
        ON CONFLICT(name) DO UPDATE SET tier = excluded.tier, rpm = excluded.rpm`).run(options.account, options.tier, rpm, now);
      this.db.prepare("INSERT INTO api_keys (id, account, tier, rpm, token_sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
        .run(id, options.account, options.tier, rpm, sha256(token), now, expiresAt);
    })();
    return { id, token };
  }

  /** Revokes a key at once; false when there is no such active key. */
  revoke(keyId: string): boolean {
    return this.db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(Math.floor(Date.now() / 1000), keyId).changes > 0;
  }

  list(): KeyRecord[] {
    return (this.db.prepare("SELECT * FROM api_keys ORDER BY created_at, id").all() as KeyRow[]).map(toRecord);
  }

  /** Checks an `Authorization` header value; throws `AuthenticationError` saying what is wrong. */
  async authenticate(header: string | undefined): Promise<KeyIdentity> {
    if (!header) throw new AuthenticationError("missing_api_key", "Authorization: missing; send `Authorization: Bearer <API_KEY>`");
    const m = /^Bearer ([^\s]+)$/.exec(header);
    if (!m) throw new AuthenticationError("invalid_auth_scheme", "Authorization: expected exactly `Bearer <API_KEY>` (scheme Bearer, one space, no extra spaces)");
    const token = m[1]!;
    let jti: string | undefined;
    try {
      this.verifyKey ??= webcrypto.subtle.importKey("raw", this.secret, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
      const { payload } = await jwtVerify(token, await this.verifyKey, { issuer: ISSUER, algorithms: ["HS256"] });
      jti = payload.jti;
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) throw new AuthenticationError("expired_api_key", "Authorization: this API key has expired");
      throw new AuthenticationError("invalid_api_key", "Authorization: the API key is not valid (bad format or signature)");
    }
    const row = jti ? (this.db.prepare("SELECT * FROM api_keys WHERE id = ?").get(jti) as KeyRow | undefined) : undefined;
    if (!row || row.token_sha256 !== sha256(token)) throw new AuthenticationError("invalid_api_key", "Authorization: the API key is not known to this service");
    if (row.revoked_at !== null) throw new AuthenticationError("revoked_api_key", "Authorization: this API key has been revoked");
    return toRecord(row);
  }
}

function toRecord(row: KeyRow): KeyRecord {
  return {
    keyId: row.id, account: row.account, tier: isTier(row.tier) ? row.tier : "free", rpm: row.rpm,
    createdAt: row.created_at, expiresAt: row.expires_at, revokedAt: row.revoked_at,
  };
}

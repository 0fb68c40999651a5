/**
 * API keys: JWTs (HS256) signed by the scheduler. A key is accepted when its signature verifies,
 * it has not expired, and its key id (`jti`) is still active in the database with the same token
 * hash. Tokens are shown once at creation and stored only as SHA-256.
 *
 * A token whose signature and hash have been checked once is remembered (bounded), so a repeat
 * request only checks its expiry, and reads its key row again only when the database may have
 * changed since (`Store.changeCount`: SQLite sees another process's commit from the next turn of
 * the event loop; PostgreSQL once its trigger's notification arrives, a few ms, and reads at every
 * request while it cannot listen). The row's statement joins the key's account, so the tier and
 * requests-per-minute figure a key grants are always the account's current ones: a revocation, or
 * re-tiering an account (`kiln keys create` with another tier), from any process that shares the
 * database, applies to its existing keys from then on. Verifying with jose on every request cost
 * about 0.5 ms of each completion's time to first token: WebCrypto's HMAC runs on libuv's pool.
 */
import { createHmac, randomBytes, webcrypto } from "node:crypto";
import { sha256Hex } from "../../core/digest.js";
import { rememberAtMost } from "../../core/bounded.js";
import { parseBearer } from "../../core/http/bearer.js";
import { SignJWT, jwtVerify, errors as joseErrors } from "jose";
import { AuthenticationError, InvalidRequestError } from "../../core/errors.js";
import { withoutStackTraces } from "../../core/stackless.js";
import { ACCOUNT_NAME_RULE, isValidAccountName } from "./account-name.js";
import { ensureSetting, type Store } from "../store/index.js";
import { isTier, type Tier } from "./tiers.js";

const ISSUER = "kiln";

/** What a verified key grants: its account's current tier and limits (not those of the day the key was made). */
export interface KeyIdentity {
  keyId: string;
  account: string;
  /** The account's tier now (the `accounts` table). */
  tier: Tier;
  /** The account's own requests-per-minute figure, when it has one (enterprise accounts must). */
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

/** A token whose signature and hash matched (KeyService's `verified`). */
interface VerifiedToken {
  jti: string;
  /** Its expiry, epoch seconds. */
  exp: number | undefined;
  /** Its key's record as last read, while the store's change count is still `readAt`. */
  record?: KeyRecord;
  readAt?: number;
}

/** How many verified tokens are remembered; past it the oldest is forgotten (and verified again when seen). */
const VERIFIED_TOKENS = 10_000;

/**
 * Key rows with their account's tier and rpm: the account's figures win over the copies made in
 * `api_keys` when the key was created (kept only for a key whose account row is missing).
 */
const KEY_ROWS = `SELECT k.id, k.account, COALESCE(a.tier, k.tier) AS tier, CASE WHEN a.name IS NULL THEN k.rpm ELSE a.rpm END AS rpm,
  k.token_sha256, k.created_at, k.expires_at, k.revoked_at
  FROM api_keys k LEFT JOIN accounts a ON a.name = k.account`;

interface KeyRow {
  id: string;
  account: string;
  tier: string;
  rpm: number | null;
  token_sha256: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
}

export class KeyService {
  private readonly secret: Uint8Array;
  /** The secret imported once as an HMAC key: verifying with raw bytes would import it on every request. */
  private verifyKey: Promise<webcrypto.CryptoKey> | undefined;
  /**
   * Tokens whose signature and hash matched: token → key id and expiry (epoch seconds), and, while
   * the store counts its changes (`Store.changeCount`), the key's record as last read and
   * the count then: while the count holds, no row can have changed (a revocation by this process
   * or by `kiln keys revoke` in another), and the record stands without a read.
   */
  private readonly verified = new Map<string, VerifiedToken>();

  private constructor(
    private readonly store: Store,
    secret: string,
  ) {
    this.secret = new TextEncoder().encode(secret);
  }

  /**
   * The key service of `store`.
   * @param jwtSecret signing secret; when unset, one is generated once and kept in the database
   *   (every scheduler sharing the database signs and verifies with it).
   */
  static async open(store: Store, jwtSecret?: string): Promise<KeyService> {
    return new KeyService(store, jwtSecret ?? (await ensureSetting(store, "jwt_secret", randomBytes(32).toString("base64url"))));
  }

  /**
   * A key for another purpose than signing (`purpose` names it: "cache-scope"), derived from the
   * signing secret with HMAC-SHA256, so every scheduler that verifies the same keys derives the same
   * one, and knowing it tells nothing of the signing secret.
   */
  derivedKey(purpose: string): Buffer {
    return createHmac("sha256", this.secret).update(`kiln-derived-key\0${purpose}`).digest();
  }

  private keyRow(id: string): Promise<KeyRow | undefined> {
    return this.store.get<KeyRow>(`${KEY_ROWS} WHERE k.id = ?`, [id]);
  }

  /** Creates (or re-tiers) the account and issues a key; the token is returned only here. */
  async create(options: CreateKeyOptions): Promise<{ id: string; token: string }> {
    if (!isValidAccountName(options.account)) throw new InvalidRequestError("invalid_account", `account: ${ACCOUNT_NAME_RULE} (got ${JSON.stringify(options.account)})`);
    if (options.tier === "enterprise" && options.rpm === undefined) throw new Error("rpm: enterprise accounts need their own requests-per-minute figure (--rpm)");
    const id = `key_${randomBytes(9).toString("base64url")}`;
    const now = Math.floor(Date.now() / 1000);
    const expiresAt = options.expiresInSeconds !== undefined ? now + options.expiresInSeconds : null;
    const jwt = new SignJWT({ tier: options.tier }).setProtectedHeader({ alg: "HS256", typ: "JWT" }).setIssuer(ISSUER).setSubject(options.account).setJti(id).setIssuedAt(now);
    if (expiresAt !== null) jwt.setExpirationTime(expiresAt);
    const token = await jwt.sign(this.secret);
    const rpm = options.rpm ?? null;
    await this.store.transaction(async (tx) => {
      await tx.run(
        `INSERT INTO accounts (name, tier, rpm, created_at) VALUES (?, ?, ?, ?)
        ON CONFLICT(name) DO UPDATE SET tier = excluded.tier, rpm = excluded.rpm`,
        [options.account, options.tier, rpm, now],
      );
      await tx.run("INSERT INTO api_keys (id, account, tier, rpm, token_sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)", [
        id,
        options.account,
        options.tier,
        rpm,
        sha256Hex(token),
        now,
        expiresAt,
      ]);
    });
    return { id, token };
  }

  /** Revokes a key at once; false when there is no such active key. */
  async revoke(keyId: string): Promise<boolean> {
    return (await this.store.run("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [Math.floor(Date.now() / 1000), keyId])).changes > 0;
  }

  /** Every key, oldest first, with its account's current tier and rpm. */
  async list(): Promise<KeyRecord[]> {
    return (await this.store.all<KeyRow>(`${KEY_ROWS} ORDER BY k.created_at, k.id`)).map(toRecord);
  }

  /** Checks an `Authorization` header value; throws `AuthenticationError` saying what is wrong. */
  async authenticate(header: string | undefined): Promise<KeyIdentity> {
    if (!header) throw withoutStackTraces(() => new AuthenticationError("missing_api_key", "Authorization: missing; send `Authorization: Bearer <API_KEY>`"));
    const token = parseBearer(header);
    if (!token)
      throw withoutStackTraces(
        () => new AuthenticationError("invalid_auth_scheme", "Authorization: expected exactly `Bearer <API_KEY>` (scheme Bearer, one space, no extra spaces)"),
      );
    const known = this.verified.get(token);
    if (known) {
      if (known.exp !== undefined && known.exp * 1000 <= Date.now())
        throw withoutStackTraces(() => new AuthenticationError("expired_api_key", "Authorization: this API key has expired"));
      const count = this.store.changeCount?.();
      if (count !== undefined && known.readAt === count) return known.record!;
      return this.remember(known, this.active(await this.keyRow(known.jti)), count);
    }
    let jti: string | undefined, exp: number | undefined;
    try {
      this.verifyKey ??= webcrypto.subtle.importKey("raw", this.secret, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
      ({
        payload: { jti, exp },
      } = await jwtVerify(token, await this.verifyKey, { issuer: ISSUER, algorithms: ["HS256"] }));
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) throw withoutStackTraces(() => new AuthenticationError("expired_api_key", "Authorization: this API key has expired"));
      throw withoutStackTraces(() => new AuthenticationError("invalid_api_key", "Authorization: the API key is not valid (bad format or signature)"));
    }
    const count = this.store.changeCount?.();
    const row = jti ? await this.keyRow(jti) : undefined;
    if (!row || row.token_sha256 !== sha256Hex(token))
      throw withoutStackTraces(() => new AuthenticationError("invalid_api_key", "Authorization: the API key is not known to this service"));
    const verified: VerifiedToken = { jti: row.id, exp };
    rememberAtMost(this.verified, token, verified, VERIFIED_TOKENS);
    return this.remember(verified, this.active(row), count);
  }

  /** `record`, kept in `known` with the store's change count before its row was read (where the store counts them). */
  private remember(known: VerifiedToken, record: KeyRecord, count: number | undefined): KeyRecord {
    if (count !== undefined) {
      known.record = Object.freeze(record);
      known.readAt = count;
    }
    return record;
  }

  /** The key row of a verified token, unless it has been revoked (or deleted) since. */
  private active(row: KeyRow | undefined): KeyRecord {
    if (!row) throw withoutStackTraces(() => new AuthenticationError("invalid_api_key", "Authorization: the API key is not known to this service"));
    if (row.revoked_at !== null) throw withoutStackTraces(() => new AuthenticationError("revoked_api_key", "Authorization: this API key has been revoked"));
    return toRecord(row);
  }
}

function toRecord(row: KeyRow): KeyRecord {
  return {
    keyId: row.id,
    account: row.account,
    tier: isTier(row.tier) ? row.tier : "free",
    rpm: row.rpm,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
  };
}

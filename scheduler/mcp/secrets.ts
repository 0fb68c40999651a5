/**
 * Per-account secrets for MCP configurations. A configuration never holds a secret: its `*_env`
 * members (and `env_from` values) name one of the account's own secret variables, set
 * write-only through the API or the dashboard and never returned or logged. The scheduler's
 * process environment is never read for a tenant.
 *
 * Values are stored encrypted (AES-256-GCM, a fresh 96-bit nonce per write, the account and the
 * name as associated data so a ciphertext cannot be moved to another account or name). The key
 * is `--secrets-key` / `KILN_SECRETS_KEY` (32 bytes as base64 or hex) or, when unset, a key file
 * beside the database (`<db>.secrets-key`, created once with mode 0600), never the database.
 */
import { z } from "zod";
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { KilnError, ConfigError } from "../../core/errors.js";
import { isPostgresUrl, type Store } from "../store/index.js";

/** Names of secret variables: what `*_env` members may hold. */
export const SECRET_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
/** Largest secret value, in bytes (a PEM private key fits). */
export const MAX_SECRET_BYTES = 16 * 1024;

/** `PUT …/secrets/{name}`: the value, written once and never shown again. */
export const SecretValueRequest = z
  .looseObject({
    value: z
      .string({ error: "a non-empty string" })
      .min(1, { error: "a non-empty string" })
      .meta({ description: `The secret's value (at most ${16 * 1024} bytes).` }),
  })
  .meta({ id: "SecretValue" });
/** Secrets per account. */
export const MAX_SECRETS_PER_ACCOUNT = 100;

/** A configuration names a secret the account does not have (the tester answers 502 `mcp_misconfigured`). */
export class MissingSecretError extends KilnError {
  constructor(readonly variable: string) {
    super("missing_secret", `secret ${variable} is not set for this account`);
  }
}

/** Reads one of an account's secrets by name; throws `MissingSecretError` when it has none. */
export type SecretReader = (name: string | undefined) => string;

/** The same, but no name means no secret (an optional password). */
export const optionalSecret = (read: SecretReader, name: string | undefined): string | undefined => (name ? read(name) : undefined);

/** The 32-byte key: from the configured value, else from (or into) the key file beside the database. */
export function loadSecretsKey(configured: string | undefined, dbPath: string): Buffer {
  if (configured) {
    const key = /^[0-9a-f]{64}$/i.test(configured) ? Buffer.from(configured, "hex") : Buffer.from(configured, "base64");
    if (key.length !== 32) throw new ConfigError("--secrets-key / KILN_SECRETS_KEY", "must be 32 bytes, as 64 hex digits or base64");
    return key;
  }
  if (isPostgresUrl(dbPath)) {
    throw new ConfigError(
      "--secrets-key / KILN_SECRETS_KEY",
      "is required with a PostgreSQL --db: every scheduler sharing the database must encrypt and decrypt the accounts' MCP secrets with the same key (32 bytes, as 64 hex digits or base64)",
    );
  }
  if (dbPath === ":memory:") return randomBytes(32);
  const file = `${dbPath}.secrets-key`;
  if (!existsSync(file)) {
    try {
      writeFileSync(file, randomBytes(32).toString("base64"), { mode: 0o600, flag: "wx" });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err; // another process made it first
    }
  }
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  const key = Buffer.from(readFileSync(file, "utf8").trim(), "base64");
  if (key.length !== 32) throw new ConfigError("--secrets-key / KILN_SECRETS_KEY", `the key file ${file} does not hold a 32-byte base64 key`);
  return key;
}

interface Row {
  nonce: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

export class AccountSecrets {
  constructor(
    private readonly store: Store,
    private readonly key: Buffer,
  ) {}

  /**
   * Stores (or replaces) a secret; false when the account already has the most it may hold. The
   * count and the write are one step for every scheduler sharing the database (a lock per account),
   * so requests sent at once cannot pass the cap together.
   */
  async set(account: string, name: string, value: string): Promise<boolean> {
    const nonce = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    cipher.setAAD(aad(account, name));
    const ciphertext = Buffer.concat([cipher.update(value, "utf8"), cipher.final()]);
    return this.store.transaction(
      async (tx) => {
        const names = (await tx.all<{ name: string }>("SELECT name FROM account_secrets WHERE account = ?", [account])).map((r) => r.name);
        if (!names.includes(name) && names.length >= MAX_SECRETS_PER_ACCOUNT) return false;
        await tx.run(
          `INSERT INTO account_secrets (account, name, nonce, ciphertext, tag, updated_at) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT(account, name) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, tag = excluded.tag, updated_at = excluded.updated_at`,
          [account, name, nonce, ciphertext, cipher.getAuthTag(), Math.floor(Date.now() / 1000)],
        );
        return true;
      },
      { lock: `account_secrets:${account}` },
    );
  }

  /** The account's secret names and when each was last set; never the values. */
  list(account: string): Promise<{ name: string; updated_at: number }[]> {
    return this.store.all<{ name: string; updated_at: number }>("SELECT name, updated_at FROM account_secrets WHERE account = ? ORDER BY name", [account]);
  }

  async names(account: string): Promise<string[]> {
    return (await this.list(account)).map((s) => s.name);
  }

  async delete(account: string, name: string): Promise<boolean> {
    return (await this.store.run("DELETE FROM account_secrets WHERE account = ? AND name = ?", [account, name])).changes > 0;
  }

  /**
   * A reader of this account's secrets only: their encrypted rows are read here, once (an account
   * holds a few), and each is decrypted when the test asks for it by name.
   */
  async reader(account: string): Promise<SecretReader> {
    const rows = new Map(
      (await this.store.all<Row & { name: string }>("SELECT name, nonce, ciphertext, tag FROM account_secrets WHERE account = ?", [account])).map((r) => [r.name, r]),
    );
    return (name) => {
      const row = name ? rows.get(name) : undefined;
      if (!row) throw new MissingSecretError(name ?? "(none named)");
      const decipher = createDecipheriv("aes-256-gcm", this.key, row.nonce);
      decipher.setAAD(aad(account, name!));
      decipher.setAuthTag(row.tag);
      return Buffer.concat([decipher.update(row.ciphertext), decipher.final()]).toString("utf8");
    };
  }
}

const aad = (account: string, name: string): Buffer => Buffer.from(`${account}\0${name}`, "utf8");

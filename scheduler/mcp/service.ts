/**
 * MCP for one scheduler: the accounts' configurations and secrets, and the test. The one way in
 * for the public API (`/v1/mcp`, an account's own) and the dashboard (any account): both get the
 * same validation, caps and tenant isolation. Every test runs in a sandbox process of its own
 * (`sandbox/`), handed only the secrets its configuration names.
 */
import type { ChildProcess } from "node:child_process";
import type { StdioCatalog } from "../../config/index.js";
import { InvalidRequestError, NotFoundError, ServiceUnavailableError } from "../../core/errors.js";
import { InflightLimiter } from "../ratelimit/index.js";
import type { Logger } from "../../core/log.js";
import { parseBody } from "../../core/schema.js";
import type { EgressPolicy } from "./egress.js";
import { AccountSecrets, MAX_SECRET_BYTES, MAX_SECRETS_PER_ACCOUNT, SECRET_NAME, SecretValueRequest } from "./secrets.js";
import { secretReferences, validateMcpConfig } from "./config.js";
import { stopSandboxes, testInSandbox, type SandboxSettings } from "./sandbox/sandbox.js";
import { McpStore, type StoredMcpServer } from "./store.js";
import type { McpTestResult } from "./tester.js";

/** Configurations per account. */
export const MAX_SERVERS_PER_ACCOUNT = 100;

export interface McpServiceOptions {
  store: McpStore;
  secrets: AccountSecrets;
  egress: EgressPolicy;
  /** The operator's stdio servers (`--mcp-stdio-servers`). Default none. */
  stdioServers?: StdioCatalog;
  /** `--mcp-fs-base`; unset: filesystem servers are refused. */
  fsBase?: string;
  /** How long a test waits for a server, in ms (`--mcp-timeout`). */
  timeoutMs: number;
  /** Tests one account may run at once (`--mcp-concurrency`, default 4). */
  concurrency: number;
  /** Tests all accounts together may run at once (`--mcp-total-concurrency`, default 32). */
  totalConcurrency?: number;
  /** What each test's sandbox process may take (`--mcp-sandbox-memory`, `--mcp-read-limit`). */
  sandbox: SandboxSettings;
  logger: Logger;
}

export class McpService {
  /** The tests running now, by account. */
  private readonly running = new InflightLimiter();
  /** Their sandbox processes. */
  private readonly sandboxes = new Set<ChildProcess>();
  private readonly stdioServers: StdioCatalog;

  constructor(private readonly options: McpServiceOptions) {
    this.stdioServers = options.stdioServers ?? {};
  }

  /** Kills the sandboxes of the tests still running (the scheduler is stopping). */
  close(): void {
    stopSandboxes(this.sandboxes);
  }

  /** The names of the operator's stdio servers tenants may pick. */
  stdioServerNames(): string[] {
    return Object.keys(this.stdioServers);
  }

  list(account: string): Promise<StoredMcpServer[]> {
    return this.options.store.list(account);
  }

  async get(account: string, id: string): Promise<StoredMcpServer> {
    const server = await this.options.store.get(account, id);
    if (!server) throw new NotFoundError("mcp_server_not_found", `server_id: no MCP server "${id}" in this account`);
    return server;
  }

  async create(account: string, body: unknown): Promise<StoredMcpServer> {
    const config = await this.validate(account, body);
    const created = await this.options.store.create(account, config, MAX_SERVERS_PER_ACCOUNT);
    if (!created)
      throw new InvalidRequestError("mcp_server_limit", `name: this account already has ${MAX_SERVERS_PER_ACCOUNT} MCP configurations, the most it may keep; delete one first`);
    return created;
  }

  async update(account: string, id: string, body: unknown): Promise<StoredMcpServer> {
    await this.get(account, id);
    const updated = await this.options.store.update(account, id, await this.validate(account, body));
    if (!updated) throw new NotFoundError("mcp_server_not_found", `server_id: no MCP server "${id}" in this account`); // deleted meanwhile
    return updated;
  }

  async delete(account: string, id: string): Promise<void> {
    await this.get(account, id);
    await this.options.store.delete(account, id);
  }

  /** The account's secret names (never values). */
  listSecrets(account: string): Promise<{ name: string; updated_at: number }[]> {
    return this.options.secrets.list(account);
  }

  async setSecret(account: string, name: string, body: unknown): Promise<{ name: string }> {
    if (!SECRET_NAME.test(name)) throw new InvalidRequestError("invalid_secret_name", "name: a secret's name is 1–128 of A-Z, 0-9 and _, not starting with a digit");
    const { value } = parseBody(SecretValueRequest, body);
    if (Buffer.byteLength(value) > MAX_SECRET_BYTES) throw new InvalidRequestError("secret_too_large", `value: at most ${MAX_SECRET_BYTES} bytes`);
    if (!(await this.options.secrets.set(account, name, value)))
      throw new InvalidRequestError("secret_limit", `name: this account already has ${MAX_SECRETS_PER_ACCOUNT} secrets, the most it may keep`);
    return { name };
  }

  async deleteSecret(account: string, name: string): Promise<void> {
    if (!(await this.options.secrets.delete(account, name))) throw new NotFoundError("secret_not_found", `name: this account has no secret named ${name}`);
  }

  /** Tests one of the account's configurations; at most `concurrency` at once per account (429 beyond). */
  async test(account: string, id: string, requestId?: string): Promise<McpTestResult> {
    const server = await this.get(account, id);
    const release = this.running.acquire(
      account,
      this.options.concurrency,
      (n) => `server_id: this account already has ${n} MCP tests running, the most it may run at once; retry when one ends`,
    );
    if (this.running.total > (this.options.totalConcurrency ?? 32)) {
      release();
      throw new ServiceUnavailableError("mcp_busy", "server_id: the scheduler is running as many MCP tests as it may; retry shortly");
    }
    try {
      const { egress, fsBase, timeoutMs, logger, sandbox } = this.options;
      const job = {
        server,
        account,
        secrets: await this.secretsOf(account, server),
        egress: egress.portable(),
        stdioServers: stdioEntryFor(this.stdioServers, server),
        timeoutMs,
        ...(fsBase ? { fsBase } : {}),
        ...(requestId ? { requestId } : {}),
      };
      return await testInSandbox(job, sandbox, logger, this.sandboxes);
    } finally {
      release();
    }
  }

  /** The values of the account's secrets that the configuration names (a missing one is left out: the test then says it is missing). */
  private async secretsOf(account: string, server: StoredMcpServer): Promise<Record<string, string>> {
    const read = await this.options.secrets.reader(account);
    const values: Record<string, string> = {};
    for (const { name } of secretReferences(server.config)) {
      try {
        values[name] = read(name);
      } catch {
        /* not set (MissingSecretError), or not readable under this key: the sandbox reports it as missing */
      }
    }
    return values;
  }

  private async validate(account: string, body: unknown) {
    return validateMcpConfig(body, {
      stdioServers: this.stdioServers,
      filesystem: Boolean(this.options.fsBase),
      secrets: await this.options.secrets.names(account),
    });
  }
}

/** The operator's stdio server a configuration names, alone: a sandbox sees no other catalog entry, nor their fixed variables. */
export function stdioEntryFor(catalog: StdioCatalog, server: Pick<StoredMcpServer, "server_type" | "config">): StdioCatalog {
  const name = server.server_type === "mcp" ? (server.config as { server?: unknown }).server : undefined;
  return typeof name === "string" && Object.hasOwn(catalog, name) ? { [name]: catalog[name]! } : {};
}

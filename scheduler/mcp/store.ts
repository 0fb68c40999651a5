/** MCP server configurations in the scheduler's database, per account. */
import { randomBytes } from "node:crypto";
import type { Store } from "../store/index.js";
import type { McpServerConfig, ServerType } from "./config.js";

export interface StoredMcpServer extends McpServerConfig {
  id: string;
  created_at: number;
  updated_at: number;
}

interface Row {
  id: string;
  name: string;
  description: string | null;
  server_type: ServerType;
  config: string;
  created_at: number;
  updated_at: number;
}

const fromRow = (r: Row): StoredMcpServer => ({
  id: r.id,
  name: r.name,
  ...(r.description !== null ? { description: r.description } : {}),
  server_type: r.server_type,
  config: JSON.parse(r.config) as Record<string, unknown>,
  created_at: r.created_at,
  updated_at: r.updated_at,
});

export class McpStore {
  constructor(private readonly store: Store) {}

  /**
   * Stores a configuration unless the account already has `max`; undefined then. The count and the
   * insert are one step for every scheduler sharing the database (a lock per account), so requests
   * sent at once cannot pass the cap together.
   */
  async create(account: string, c: McpServerConfig, max: number): Promise<StoredMcpServer | undefined> {
    const id = `mcp_${randomBytes(9).toString("base64url")}`;
    const now = Math.floor(Date.now() / 1000);
    const stored = await this.store.transaction(
      async (tx) => {
        const { n } = (await tx.get<{ n: number }>("SELECT COUNT(*) AS n FROM mcp_servers WHERE account = ?", [account]))!;
        if (n >= max) return false;
        await tx.run("INSERT INTO mcp_servers (id, account, name, description, server_type, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
          id,
          account,
          c.name,
          c.description ?? null,
          c.server_type,
          JSON.stringify(c.config),
          now,
          now,
        ]);
        return true;
      },
      { lock: `mcp_servers:${account}` },
    );
    return stored ? this.get(account, id) : undefined;
  }

  async get(account: string, id: string): Promise<StoredMcpServer | undefined> {
    const row = await this.store.get<Row>("SELECT * FROM mcp_servers WHERE account = ? AND id = ?", [account, id]);
    return row && fromRow(row);
  }

  async list(account: string): Promise<StoredMcpServer[]> {
    return (await this.store.all<Row>("SELECT * FROM mcp_servers WHERE account = ? ORDER BY created_at, id", [account])).map(fromRow);
  }

  async update(account: string, id: string, c: McpServerConfig): Promise<StoredMcpServer | undefined> {
    const res = await this.store.run("UPDATE mcp_servers SET name = ?, description = ?, server_type = ?, config = ?, updated_at = ? WHERE account = ? AND id = ?", [
      c.name,
      c.description ?? null,
      c.server_type,
      JSON.stringify(c.config),
      Math.floor(Date.now() / 1000),
      account,
      id,
    ]);
    return res.changes ? this.get(account, id) : undefined;
  }

  async delete(account: string, id: string): Promise<boolean> {
    return (await this.store.run("DELETE FROM mcp_servers WHERE account = ? AND id = ?", [account, id])).changes > 0;
  }
}

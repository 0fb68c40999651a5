/** MCP server configurations in the scheduler's database, per account. */
import { randomBytes } from "node:crypto";
import type { Db } from "../store/index.js";
import type { McpServerConfig, ServerType } from "./config.js";

export interface StoredMcpServer extends McpServerConfig {
  id: string;
  created_at: number;
  updated_at: number;
}

interface Row { id: string; name: string; description: string | null; server_type: ServerType; config: string; created_at: number; updated_at: number }

const fromRow = (r: Row): StoredMcpServer => ({
  id: r.id, name: r.name, ...(r.description !== null ? { description: r.description } : {}), server_type: r.server_type,
  config: JSON.parse(r.config) as Record<string, unknown>, created_at: r.created_at, updated_at: r.updated_at,
});

export class McpStore {
  constructor(private readonly db: Db) {}

  create(account: string, c: McpServerConfig): StoredMcpServer {
    const id = `mcp_${randomBytes(9).toString("base64url")}`;
    const now = Math.floor(Date.now() / 1000);
    this.db.prepare("INSERT INTO mcp_servers (id, account, name, description, server_type, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .run(id, account, c.name, c.description ?? null, c.server_type, JSON.stringify(c.config), now, now);
    return this.get(account, id)!;
  }

  get(account: string, id: string): StoredMcpServer | undefined {
    const row = this.db.prepare("SELECT * FROM mcp_servers WHERE account = ? AND id = ?").get(account, id) as Row | undefined;
    return row && fromRow(row);
  }

  list(account: string): StoredMcpServer[] {
    return (this.db.prepare("SELECT * FROM mcp_servers WHERE account = ? ORDER BY created_at, id").all(account) as Row[]).map(fromRow);
  }

  update(account: string, id: string, c: McpServerConfig): StoredMcpServer | undefined {
    const res = this.db.prepare("UPDATE mcp_servers SET name = ?, description = ?, server_type = ?, config = ?, updated_at = ? WHERE account = ? AND id = ?")
      .run(c.name, c.description ?? null, c.server_type, JSON.stringify(c.config), Math.floor(Date.now() / 1000), account, id);
    return res.changes ? this.get(account, id) : undefined;
  }

  delete(account: string, id: string): boolean {
    return this.db.prepare("DELETE FROM mcp_servers WHERE account = ? AND id = ?").run(account, id).changes > 0;
  }
}

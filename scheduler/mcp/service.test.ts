import { describe, expect, it } from "vitest";
import type { StdioServerSpec } from "../../config/index.js";
import { stdioEntryFor } from "./service.js";

const spec = (secret: string): StdioServerSpec =>
  ({ command: "/bin/true", args: [], env: { OPERATOR_KEY: secret }, tenant_env: [], memory_mb: 64, cpu_seconds: 1 }) as StdioServerSpec;

describe("what a sandbox is handed of the operator's stdio catalog", () => {
  const catalog = { echo: spec("echo-secret"), billing: spec("billing-secret") };

  it("a stdio configuration gets its own entry alone, with none of the other entries' fixed variables", () => {
    expect(stdioEntryFor(catalog, { server_type: "mcp", config: { transport: "stdio", server: "echo" } })).toEqual({ echo: catalog.echo });
  });

  it("any other configuration, and a name no entry has (a prototype member among them), gets none", () => {
    expect(stdioEntryFor(catalog, { server_type: "mcp", config: { transport: "http", url: "https://x" } })).toEqual({});
    expect(stdioEntryFor(catalog, { server_type: "postgresql", config: { server: "echo" } })).toEqual({});
    expect(stdioEntryFor(catalog, { server_type: "mcp", config: { transport: "stdio", server: "constructor" } })).toEqual({});
  });
});

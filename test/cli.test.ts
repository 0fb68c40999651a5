/** The `kiln` command itself: help, key management on a database, config errors. */
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { tempDir } from "./helpers/fleet.js";
import { testDb } from "./helpers/db.js";

const run = promisify(execFile);
const kiln = (args: string[], env: Record<string, string> = {}): Promise<{ code?: number; stdout: string; stderr: string }> =>
  run(process.execPath, [resolve("bin/kiln.js"), ...args], { env: { ...process.env, ...env } }).catch((e: { code: number; stdout: string; stderr: string }) => e);

describe("kiln CLI", () => {
  it("--help on every command", async () => {
    const commands = [[], ["dev"], ["scheduler"], ["agent"], ["keys"], ["keys", "create"], ["models"], ["models", "pull"]];
    const helps = await Promise.all(commands.map((cmd) => kiln([...cmd, "--help"])));
    for (const r of helps) expect(r.stdout).toMatch(/Usage: kiln/);
    expect(helps[2]!.stdout).toMatch(/KILN_DB/);
    expect(helps[7]!.stdout).toMatch(/KILN_HUB_URL/);
  });

  it("keys create, list and revoke work on a database", async () => {
    const db = testDb();
    const created = await kiln(["keys", "create", "--db", db, "--account", "acme", "--tier", "pro"]);
    const id = /key id: (\S+)/.exec(created.stdout)![1]!;
    const token = /key:\s+(\S+)/.exec(created.stdout.split("\n")[1]!)![1]!;
    expect(token.split(".")).toHaveLength(3); // a JWT
    const listed = await kiln(["keys", "list", "--db", db]);
    expect(listed.stdout).toContain(`${id}\tacme\tpro`);
    expect(listed.stdout).not.toContain(token);
    expect((await kiln(["keys", "revoke", "--db", db, id])).stdout).toContain(`revoked ${id}`);
    expect((await kiln(["keys", "list", "--db", db])).stdout).toMatch(/revoked/);
  });

  it("bad input exits 1 with a message naming the flag", async () => {
    const bad = await kiln(["keys", "create", "--db", join(tempDir(), "k.db"), "--account", "a", "--tier", "gold"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--tier/);
    const noTokens = await kiln(["scheduler", "--db", join(tempDir(), "k.db")], { KILN_NODE_TOKENS: "" });
    expect(noTokens.code).toBe(1);
    expect(noTokens.stderr).toMatch(/--node-tokens \/ KILN_NODE_TOKENS/);
  });

  it("a model file that cannot load stops the agent with one line naming it, not a stack", async () => {
    const dir = tempDir();
    const bogus = join(dir, "bogus.onnx");
    writeFileSync(bogus, "not a model\n");
    const cases: [string[], RegExp][] = [
      [
        ["--scheduler", "127.0.0.1:1", "--node-token", "a-node-token-of-16+", "--serve", `famB-v3.1=${join(dir, "missing.gguf")}`],
        /^kiln: famB-v3\.1: cannot load .*missing\.gguf: no such file\n$/,
      ],
      [["--segmentation-model", bogus, "--embedding-model", bogus], /^kiln: segmentation model .*bogus\.onnx is not an ONNX file\n$/],
    ];
    for (const [args, message] of cases) {
      const r = await kiln(["agent", "--host", "127.0.0.1", "--port", "0", "--data-dir", join(dir, "data"), "--log-level", "warn", ...args]);
      expect(r.code).toBe(1);
      expect(
        r.stderr
          .split("\n")
          .filter((l) => l.startsWith("kiln:") || l.startsWith("    at "))
          .join("\n") + "\n",
      ).toMatch(message);
    }
  });

  it("merges a config file under flags and KILN_* variables; --print-config masks secrets", async () => {
    const dir = tempDir();
    const file = join(dir, "scheduler.json");
    writeFileSync(file, JSON.stringify({ "queue-size": 12, queueTimeout: 9, http: "127.0.0.1:9999", nodeTokens: "file-secret-token-0123456789", db: join(dir, "k.db") }));
    const r = await kiln(["scheduler", "--config", file, "--queue-timeout", "5", "--print-config"], { KILN_QUEUE_SIZE: "7" });
    expect(r.code ?? 0).toBe(0);
    const config = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(config).toMatchObject({ queueSize: 7, queueTimeout: 5, http: { host: "127.0.0.1", port: 9999 }, nodeTokens: "[redacted]" });
    expect(r.stdout).not.toContain("file-secret-token");

    const agent = await kiln(["agent", "--print-config", "--agent-token", "agent-secret-token-16"], {});
    expect(JSON.parse(agent.stdout)).toMatchObject({ agentToken: "[redacted]", port: 7860 });

    writeFileSync(file, JSON.stringify({ queueSise: 1 }));
    const bad = await kiln(["scheduler", "--config", file, "--print-config"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/scheduler\.json: queueSise: unknown option/);
    writeFileSync(file, "{ not json");
    expect((await kiln(["scheduler", "--config", file])).stderr).toMatch(/--config \/ KILN_CONFIG: .*scheduler\.json/);
  });
});

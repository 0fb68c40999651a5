/** The configuration's parsers and cross-option rules, each refusal naming its flag and variable. */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../core/errors.js";
import {
  AGENT_OPTIONS,
  formatHostPort,
  isLoopback,
  maskSecrets,
  nodeIdMatcher,
  optionKey,
  parseAgentConfig,
  parseNodeTokenEntry,
  parseSchedulerConfig,
  SCHEDULER_OPTIONS,
} from "./index.js";

const TOKEN = "a-long-enough-token-123";
const scheduler = (raw: Record<string, string | boolean | string[]> = {}) => parseSchedulerConfig({ nodeTokens: TOKEN, ...raw });
const refusal = (fn: () => unknown, key: string, message: RegExp | string) => {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as ConfigError).key).toBe(key);
  expect((err as ConfigError).message).toEqual(typeof message === "string" ? `${key}: ${message}` : expect.stringMatching(message));
};

describe("addresses", () => {
  it.each([
    ["127.0.0.1:80", { host: "127.0.0.1", port: 80 }],
    ["[::1]:9000", { host: "::1", port: 9000 }],
    [" 0.0.0.0:65535 ", { host: "0.0.0.0", port: 65535 }],
    [":8080", { host: "127.0.0.1", port: 8080 }],
    ["8081", { host: "127.0.0.1", port: 8081 }],
    ["example.com:1", { host: "example.com", port: 1 }],
  ])("parses %j", (text, expected) => {
    expect(scheduler({ http: text }).http).toEqual(expected);
  });

  it("trims a bare port too", () => {
    expect(scheduler({ http: " 8081 " }).http).toEqual({ host: "127.0.0.1", port: 8081 });
  });

  it.each(["127.0.0.1:65536", "127.0.0.1", "a:b", "127.0.0.1:123456", "[::1]", "::1:80", "a:b:80"])("refuses %j", (text) => {
    refusal(() => scheduler({ http: text }), "--http / KILN_HTTP", `expected HOST:PORT (e.g. 127.0.0.1:8080), got "${text}"`);
  });

  it("formats IPv6 hosts in brackets", () => {
    expect(formatHostPort({ host: "::1", port: 5 })).toBe("[::1]:5");
    expect(formatHostPort({ host: "h", port: 5 })).toBe("h:5");
  });

  it("knows loopback", () => {
    for (const h of ["127.0.0.1", "127.9.8.7", "::1", "localhost", "LOCALHOST"]) expect(isLoopback(h), h).toBe(true);
    for (const h of ["0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "example.com", "localhost.example.com"]) expect(isLoopback(h), h).toBe(false);
    // Not an IP address to node:net (an empty zone), although BlockList alone would read it as ::1.
    expect(isLoopback("::1%")).toBe(false);
  });
});

describe("numbers and sizes", () => {
  it.each([
    ["1024", 1024],
    ["4kb", 4096],
    ["2KiB", 2048],
    ["1.5mb", 1.5 * 1024 ** 2],
    ["1 gb", 1024 ** 3],
    ["3b", 3],
  ])("a size of %j is %i bytes", (text, n) => {
    if (n >= 1024) expect(scheduler({ maxBody: text }).maxBody).toBe(n);
    else refusal(() => scheduler({ maxBody: text }), "--max-body / KILN_MAX_BODY", "must be at least 1kb");
  });

  it("refuses a size it cannot read, and whole numbers out of range", () => {
    refusal(() => scheduler({ maxBody: "4 parsecs" }), "--max-body / KILN_MAX_BODY", 'expected a size like 4mb or 1048576, got "4 parsecs"');
    refusal(() => scheduler({ queueTimeout: "0" }), "--queue-timeout / KILN_QUEUE_TIMEOUT", /too small|>=1/);
    refusal(() => scheduler({ queueTimeout: "3601" }), "--queue-timeout / KILN_QUEUE_TIMEOUT", /too big|<=3600/);
    refusal(() => scheduler({ queueSize: "1.5" }), "--queue-size / KILN_QUEUE_SIZE", "expected a whole number");
    expect(scheduler({ queueTimeout: " 3600 " }).queueTimeout).toBe(3600);
  });

  it("reads every decimal of a size, and refuses one with anything before its number", () => {
    expect(scheduler({ maxBody: "1.25mb" }).maxBody).toBe(1.25 * 1024 ** 2);
    for (const text of ["-4mb", "x4mb"]) refusal(() => scheduler({ maxBody: text }), "--max-body / KILN_MAX_BODY", `expected a size like 4mb or 1048576, got "${text}"`);
  });
});

describe("node tokens", () => {
  it("a bare token registers any node id; IDS=TOKEN only those ids and globs", () => {
    expect(parseNodeTokenEntry(TOKEN)).toEqual({ token: TOKEN });
    expect(parseNodeTokenEntry(`gpu-1|rack-*=${TOKEN}`)).toEqual({ token: TOKEN, nodeIds: ["gpu-1", "rack-*"] });
    expect(parseNodeTokenEntry("YWJjZGVmZ2hpamtsbW5vcA==")).toEqual({ token: "YWJjZGVmZ2hpamtsbW5vcA==" }); // padding stays in a bare token
    expect(parseNodeTokenEntry("a/b=0123456789abcdef")).toEqual({ token: "a/b=0123456789abcdef" }); // "/" is no node id character
    expect(parseNodeTokenEntry("gpu=short")).toEqual({ token: "gpu=short" }); // under 16 after "=": bare
    expect(parseNodeTokenEntry("gpu=0123456789abcdef")).toEqual({ token: "0123456789abcdef", nodeIds: ["gpu"] }); // exactly 16
    expect(parseNodeTokenEntry("gpu=0123456789abcde")).toEqual({ token: "gpu=0123456789abcde" }); // 15 after "=": bare
    const match = nodeIdMatcher(["gpu-1", "rack-*"]);
    expect(["gpu-1", "rack-", "rack-7"].map(match)).toEqual([true, true, true]);
    expect(["gpu-10", "xgpu-1", "rack"].map(match)).toEqual([false, false, false]);
    expect(nodeIdMatcher(undefined)("anything")).toBe(true);
    expect(nodeIdMatcher(["a.b"])("axb")).toBe(false); // "." is literal
    expect(nodeIdMatcher(["a.b", "(x)+"])("a.b")).toBe(true); // escaped, not dropped
    expect(nodeIdMatcher(["(x)+"])("(x)+")).toBe(true);
  });

  it("parses the list, refusing short tokens and empty id lists without echoing a token", () => {
    expect(scheduler({ nodeTokens: `gpu-1=${TOKEN}, ${TOKEN}x` }).nodeTokens).toEqual([{ token: TOKEN, nodeIds: ["gpu-1"] }, { token: `${TOKEN}x` }]);
    refusal(() => parseSchedulerConfig({ nodeTokens: "short-token" }), "--node-tokens / KILN_NODE_TOKENS", "each token must be at least 16 characters");
    refusal(() => parseSchedulerConfig({ nodeTokens: `|=${TOKEN}` }), "--node-tokens / KILN_NODE_TOKENS", 'entry 1: IDS=TOKEN needs at least one node id before "="');
    refusal(() => parseSchedulerConfig({}), "--node-tokens / KILN_NODE_TOKENS", "is required");
    refusal(() => parseSchedulerConfig({ nodeTokens: " , " }), "--node-tokens / KILN_NODE_TOKENS", "at least one token is required");
    // a token travels as "Bearer <token>", which every side parses as one run of non-space characters
    refusal(
      () => parseSchedulerConfig({ nodeTokens: `${TOKEN},gpu-2=two words here xx` }),
      "--node-tokens / KILN_NODE_TOKENS",
      'entry 2: a token cannot hold whitespace (it travels as "Bearer <token>")',
    );
    expect(parseSchedulerConfig({ nodeTokens: "0123456789abcdef" }).nodeTokens).toEqual([{ token: "0123456789abcdef" }]); // exactly 16
    // Every problem is told, joined by "; ".
    refusal(
      () => parseSchedulerConfig({ nodeTokens: `short-token,|=${TOKEN}` }),
      "--node-tokens / KILN_NODE_TOKENS",
      'each token must be at least 16 characters; entry 2: IDS=TOKEN needs at least one node id before "="',
    );
  });
});

describe("the scheduler's gRPC rules", () => {
  it("plaintext only on loopback, or with --grpc-insecure; TLS flags in pairs", () => {
    expect(scheduler({ grpc: "0.0.0.0:1", grpcInsecure: true }).grpcInsecure).toBe(true);
    expect(scheduler({ grpc: "0.0.0.0:1", grpcInsecure: "1" }).grpcInsecure).toBe(true);
    expect(scheduler().grpcInsecure).toBe(false);
    refusal(() => scheduler({ grpc: "0.0.0.0:1" }), "--grpc / KILN_GRPC", /^--grpc \/ KILN_GRPC: 0\.0\.0\.0 is not a loopback address/);
    refusal(() => scheduler({ grpc: "0.0.0.0:1", grpcInsecure: "0" }), "--grpc / KILN_GRPC", /is not a loopback address/);
    refusal(() => scheduler({ grpcInsecure: "maybe" }), "--grpc-insecure / KILN_GRPC_INSECURE", 'expected true, false, 1 or 0, got "maybe"');
    refusal(() => scheduler({ grpcTlsCert: "c.pem" }), "--grpc-tls-key / KILN_GRPC_TLS_KEY", "is required with --grpc-tls-cert");
    refusal(() => scheduler({ grpcTlsKey: "k.pem" }), "--grpc-tls-cert / KILN_GRPC_TLS_CERT", "is required with --grpc-tls-key");
    refusal(() => scheduler({ grpcClientCa: "ca.pem" }), "--grpc-client-ca / KILN_GRPC_CLIENT_CA", "needs --grpc-tls-cert and --grpc-tls-key (mutual TLS runs over TLS)");
    refusal(
      () => scheduler({ grpcTlsCert: "c", grpcTlsKey: "k", grpcInsecure: true }),
      "--grpc-insecure / KILN_GRPC_INSECURE",
      "contradicts --grpc-tls-cert (give one or the other)",
    );
    expect(scheduler({ grpc: "0.0.0.0:1", grpcTlsCert: "c", grpcTlsKey: "k", grpcClientCa: "ca" })).toMatchObject({ grpcTlsCert: "c", grpcTlsKey: "k", grpcClientCa: "ca" });
  });

  it("MCP options: CIDRs, the stdio catalog file", () => {
    expect(scheduler({ mcpAllowCidr: ["10.0.0.0/8", "fd00::1"] }).mcpAllowCidr).toEqual(["10.0.0.0/8", "fd00::1"]);
    expect(scheduler({ mcpAllowCidr: "10.0.0.0/8,192.168.0.1" }).mcpAllowCidr).toEqual(["10.0.0.0/8", "192.168.0.1"]);
    expect(scheduler({ mcpAllowCidr: "10.0.0.0/8,,192.168.0.1," }).mcpAllowCidr).toEqual(["10.0.0.0/8", "192.168.0.1"]); // empty items of an env list are skipped
    refusal(() => scheduler({ mcpAllowCidr: "10.0.0.0/33" }), "--mcp-allow-cidr / KILN_MCP_ALLOW_CIDR", "expected a CIDR like 10.1.0.0/16 or an IP address");
    expect(scheduler().mcpStdioServers).toEqual({});
    const dir = mkdtempSync(join(tmpdir(), "kiln-cfg-"));
    writeFileSync(join(dir, "ok.json"), JSON.stringify({ echo: { command: "/usr/bin/node", tenant_env: ["X"] } }));
    expect(scheduler({ mcpStdioServers: join(dir, "ok.json") }).mcpStdioServers).toEqual({
      echo: { command: "/usr/bin/node", args: [], env: {}, tenant_env: ["X"], memory_mb: 512, cpu_seconds: 60 },
    });
    writeFileSync(join(dir, "bad.json"), JSON.stringify({ echo: { command: "node" } }));
    refusal(() => scheduler({ mcpStdioServers: join(dir, "bad.json") }), "--mcp-stdio-servers / KILN_MCP_STDIO_SERVERS", /bad\.json: echo\.command: must be an absolute path$/);
    refusal(() => scheduler({ mcpStdioServers: join(dir, "missing.json") }), "--mcp-stdio-servers / KILN_MCP_STDIO_SERVERS", /missing\.json: ENOENT/);
  });

  it("--catalog: the operator's model catalog file, read and checked at start; a refusal names the file, the entry and the field", () => {
    expect(scheduler().catalog).toBeUndefined();
    const dir = mkdtempSync(join(tmpdir(), "kiln-cfg-"));
    const file = (name: string, json: unknown) => {
      writeFileSync(join(dir, name), typeof json === "string" ? json : JSON.stringify(json));
      return join(dir, name);
    };
    expect(scheduler({ catalog: file("ok.json", { models: [{ id: "house/chat", source: "hf:org/repo:Q4_K_M", aliases: ["gpt-4o"] }] }) }).catalog).toEqual({
      models: [{ id: "house/chat", source: "hf:org/repo:Q4_K_M", aliases: ["gpt-4o"], context_size: 4096, sequences: 4, min_replicas: 0, max_replicas: 1, idle_unload_s: 600 }],
    });
    const bad = file("bad.json", {
      models: [
        { id: "a", source: "/m/a.gguf" },
        { id: "b", source: "/m/b.gguf" },
        { id: "famX", source: "/m/x.gguf", min_replicas: 2, max_replicas: 1 },
      ],
    });
    refusal(() => scheduler({ catalog: bad }), "--catalog / KILN_CATALOG", `${bad}: models[2] ("famX"): max_replicas: must be ≥ min_replicas (2), got 1`);
    refusal(() => scheduler({ catalog: file("broken.json", "{") }), "--catalog / KILN_CATALOG", /broken\.json: .*JSON/);
    refusal(() => scheduler({ catalog: join(dir, "missing.json") }), "--catalog / KILN_CATALOG", /missing\.json: ENOENT/);
  });

  it("masks secrets for printing", () => {
    const c = scheduler({ adminToken: "an-admin-token-of-16+" });
    const masked = maskSecrets(SCHEDULER_OPTIONS, c as unknown as Record<string, unknown>);
    expect(masked.adminToken).toBe("[redacted]");
    expect(masked.nodeTokens).toBe("[redacted]");
    expect(masked.jwtSecret).toBeUndefined();
    expect(masked.queueSize).toBe(256);
    expect(maskSecrets(SCHEDULER_OPTIONS, { notAnOption: "x", nodeTokens: [] })).toEqual({ notAnOption: "x", nodeTokens: "[redacted]" }); // an undeclared key passes through
  });
});

describe("the scheduler's CORS origins", () => {
  it("* or an origin exactly as a browser sends it: http(s), host and port, no path", () => {
    expect(scheduler({ corsOrigin: ["*"] }).corsOrigin).toEqual(["*"]);
    expect(scheduler({ corsOrigin: ["https://app.example.com", "http://localhost:3000"] }).corsOrigin).toEqual(["https://app.example.com", "http://localhost:3000"]);
    expect(scheduler({ corsOrigin: "https://app.example.com,http://10.0.0.1:8080" }).corsOrigin).toEqual(["https://app.example.com", "http://10.0.0.1:8080"]);
    for (const bad of ["https://app.example.com/", "https://app.example.com/x", "ftp://files.example.com", "app.example.com", "**"])
      refusal(
        () => scheduler({ corsOrigin: [bad] }),
        "--cors-origin / KILN_CORS_ORIGIN",
        /expected \* or an origin such as https:\/\/app\.example\.com \(scheme, host and port; no path\)$/,
      );
  });
});

describe("the option declarations", () => {
  it("every refusal of a value is a zod custom issue", () => {
    const codes = (schema: { safeParse(v: unknown): { error?: { issues: { code: string }[] } } }, value: unknown) => schema.safeParse(value).error!.issues.map((i) => i.code);
    expect(codes(SCHEDULER_OPTIONS.http.schema, "nowhere")).toEqual(["custom"]);
    expect(codes(SCHEDULER_OPTIONS.maxBody.schema, "4 parsecs")).toEqual(["custom"]);
    expect(codes(SCHEDULER_OPTIONS.grpcInsecure.schema, "maybe")).toEqual(["custom"]);
    expect(codes(SCHEDULER_OPTIONS.nodeTokens.schema, `short-token,|=${TOKEN}`)).toEqual(["custom", "custom"]);
    expect(codes(SCHEDULER_OPTIONS.maxInflight.schema, "gold=1")).toEqual(["custom"]);
    expect(codes(SCHEDULER_OPTIONS.mcpStdioServers.schema, join(tmpdir(), "kiln-no-such-catalog.json"))).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.resultTtl.schema, "soon")).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.uploadBudget.schema, "0%")).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.uploadBudget.schema, "1kb")).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.serve.schema, ["nothing"])).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.serve.schema, ["a=hf:nothing"])).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.scheduler.schema, "127.0.0.1:5,nope")).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.scheduler.schema, "127.0.0.1:5,127.0.0.1:5")).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.hubUrl.schema, "ftp://hub")).toEqual(["custom"]);
    expect(codes(AGENT_OPTIONS.pull.schema, ["ollama:llama3"])).toEqual(["custom"]);
  });

  it("each option's key is the camel case of its long flag (what commander hands back)", () => {
    for (const options of [SCHEDULER_OPTIONS, AGENT_OPTIONS]) for (const [key, spec] of Object.entries(options)) expect(optionKey(spec), spec.flags).toBe(key);
    expect(optionKey({ ...SCHEDULER_OPTIONS.db, flags: "--a1-b2-c <x>" })).toBe("a1B2C");
    expect(optionKey({ ...SCHEDULER_OPTIONS.db, flags: "<no long flag>" })).toBe("");
  });
});

describe("the agent's rules", () => {
  const agent = (raw: Record<string, string | boolean | string[]> = {}) => parseAgentConfig({ host: "127.0.0.1", ...raw });

  it("the transcription API off loopback needs --agent-token (16+ characters) or --agent-insecure, not both", () => {
    refusal(
      () => parseAgentConfig({}),
      "--host / KILN_HOST",
      "0.0.0.0 is reachable from other machines and no --agent-token is set: pass --agent-token (every /api call then needs it), --host 127.0.0.1 to serve this machine only, or --agent-insecure to serve without a token anyway",
    );
    refusal(() => agent({ host: "10.1.2.3" }), "--host / KILN_HOST", /^--host \/ KILN_HOST: 10\.1\.2\.3 is reachable/);
    expect(agent({ host: "0.0.0.0", agentToken: TOKEN })).toMatchObject({ host: "0.0.0.0", agentToken: TOKEN, agentInsecure: false });
    expect(agent({ host: "::", agentInsecure: true })).toMatchObject({ host: "::", agentInsecure: true });
    expect(agent({ host: "localhost" }).agentToken).toBeUndefined();
    refusal(() => agent({ agentToken: "short" }), "--agent-token / KILN_AGENT_TOKEN", "must be at least 16 characters");
    refusal(() => agent({ agentToken: "a long token with spaces" }), "--agent-token / KILN_AGENT_TOKEN", 'cannot hold whitespace (it travels as "Bearer <token>")');
    refusal(() => agent({ agentToken: TOKEN, agentInsecure: "1" }), "--agent-insecure / KILN_AGENT_INSECURE", "contradicts --agent-token (give one or the other)");
    for (const off of [false, "false", "0", " false "]) expect(agent({ agentInsecure: off }).agentInsecure, String(off)).toBe(false);
  });

  it("budgets and retention: sizes or shares, durations", () => {
    expect(agent()).toMatchObject({ uploadBudget: { share: 0.5 }, maxClientUploads: 2, resultTtl: 7 * 86_400, maxResults: 10_000, ffmpegStallSeconds: 120 });
    expect(agent({ uploadBudget: "20gb" }).uploadBudget).toEqual({ bytes: 20 * 1024 ** 3 });
    expect(agent({ uploadBudget: "12.5%" }).uploadBudget).toEqual({ share: 0.125 });
    refusal(() => agent({ uploadBudget: "0%" }), "--upload-budget / KILN_UPLOAD_BUDGET", 'a share of the free disk must be above 0% and at most 100%, got "0%"');
    refusal(() => agent({ uploadBudget: "150%" }), "--upload-budget / KILN_UPLOAD_BUDGET", /at most 100%/);
    refusal(
      () => agent({ uploadBudget: "1kb" }),
      "--upload-budget / KILN_UPLOAD_BUDGET",
      'expected a size of at least 1mb (like 20gb) or a share of the free disk (like 25%), got "1kb"',
    );
    for (const [given, seconds] of [
      ["90s", 90],
      ["30m", 1800],
      ["12h", 43_200],
      ["7D", 604_800],
      ["3600", 3600],
    ] as const)
      expect(agent({ resultTtl: given }).resultTtl, given).toBe(seconds);
    refusal(() => agent({ resultTtl: "soon" }), "--result-ttl / KILN_RESULT_TTL", 'expected a duration like 90s, 30m, 12h or 7d, got "soon"');
    refusal(() => agent({ resultTtl: "59s" }), "--result-ttl / KILN_RESULT_TTL", "must be at least 60s");
  });

  it("budgets and durations at their edges, and nothing before or after the number", () => {
    expect(agent({ uploadBudget: "100%" }).uploadBudget).toEqual({ share: 1 });
    expect(agent({ uploadBudget: "1mb" }).uploadBudget).toEqual({ bytes: 1024 ** 2 });
    expect(agent({ uploadBudget: "12.25%" }).uploadBudget).toEqual({ share: 0.1225 });
    expect(agent({ uploadBudget: "50 %" }).uploadBudget).toEqual({ share: 0.5 });
    for (const text of ["-5%", "50%x", "50x%"])
      refusal(
        () => agent({ uploadBudget: text }),
        "--upload-budget / KILN_UPLOAD_BUDGET",
        `expected a size of at least 1mb (like 20gb) or a share of the free disk (like 25%), got "${text}"`,
      );
    for (const text of ["-90s", "90 seconds", "x90s"])
      refusal(() => agent({ resultTtl: text }), "--result-ttl / KILN_RESULT_TTL", `expected a duration like 90s, 30m, 12h or 7d, got "${text}"`);
  });
  it("a scheduler needs a node token; plaintext only to loopback; TLS flags in pairs", () => {
    expect(agent({ scheduler: "127.0.0.1:5", nodeToken: TOKEN }).scheduler).toEqual([{ host: "127.0.0.1", port: 5 }]);
    expect(agent({ scheduler: "127.0.0.1:5, [::1]:6", nodeToken: TOKEN }).scheduler).toEqual([
      { host: "127.0.0.1", port: 5 },
      { host: "::1", port: 6 },
    ]);
    refusal(
      () => agent({ scheduler: "127.0.0.1:5,nope", nodeToken: TOKEN }),
      "--scheduler / KILN_SCHEDULER",
      'expected HOST:PORT, or several comma-separated (e.g. 10.0.0.1:50051,10.0.0.2:50051), got "nope"',
    );
    refusal(
      () => agent({ scheduler: "127.0.0.1:5, nope ", nodeToken: TOKEN }),
      "--scheduler / KILN_SCHEDULER",
      'expected HOST:PORT, or several comma-separated (e.g. 10.0.0.1:50051,10.0.0.2:50051), got "nope"',
    ); // the item as written in the list, without the spaces around it
    refusal(() => agent({ scheduler: "127.0.0.1:5,127.0.0.1:5", nodeToken: TOKEN }), "--scheduler / KILN_SCHEDULER", "127.0.0.1:5 is named twice");
    expect(agent({ scheduler: "127.0.0.1:5,127.0.0.1:6", nodeToken: TOKEN }).scheduler).toEqual([
      { host: "127.0.0.1", port: 5 },
      { host: "127.0.0.1", port: 6 },
    ]); // one host, two ports: two schedulers
    refusal(
      () => agent({ scheduler: "127.0.0.1:5,10.0.0.9:5", nodeToken: TOKEN }),
      "--scheduler / KILN_SCHEDULER",
      /^--scheduler \/ KILN_SCHEDULER: 10\.0\.0\.9 is not a loopback address/,
    );
    refusal(() => agent({ scheduler: "127.0.0.1:5" }), "--node-token / KILN_NODE_TOKEN", "is required with --scheduler");
    refusal(() => agent({ scheduler: "10.0.0.1:5", nodeToken: TOKEN }), "--scheduler / KILN_SCHEDULER", /^--scheduler \/ KILN_SCHEDULER: 10\.0\.0\.1 is not a loopback address/);
    expect(agent({ scheduler: "10.0.0.1:5", nodeToken: TOKEN, grpcInsecure: "true" }).grpcInsecure).toBe(true);
    expect(agent({ scheduler: "10.0.0.1:5", nodeToken: TOKEN, schedulerCa: "ca" }).schedulerCa).toBe("ca");
    refusal(() => agent({ tlsCert: "c" }), "--tls-key / KILN_TLS_KEY", "is required with --tls-cert");
    refusal(() => agent({ tlsKey: "k" }), "--tls-cert / KILN_TLS_CERT", "is required with --tls-key");
    refusal(() => agent({ tlsCert: "c", tlsKey: "k" }), "--scheduler-ca / KILN_SCHEDULER_CA", "is required with --tls-cert (a client certificate is presented over TLS)");
    refusal(() => agent({ schedulerCa: "ca", grpcInsecure: true }), "--grpc-insecure / KILN_GRPC_INSECURE", "contradicts --scheduler-ca (give one or the other)");
  });

  it("diarization needs both models; the translation model must be served; --serve pairs are ID=GGUF", () => {
    refusal(() => agent({ segmentationModel: "s.onnx" }), "--embedding-model / KILN_EMBEDDING_MODEL", "is required for speaker diarization (give both models)");
    refusal(() => agent({ embeddingModel: "e.onnx" }), "--segmentation-model / KILN_SEGMENTATION_MODEL", "is required for speaker diarization (give both models)");
    expect(agent({ segmentationModel: "s", embeddingModel: "e" })).toMatchObject({ segmentationModel: "s", embeddingModel: "e" });
    refusal(() => agent({ translationModel: "x", serve: ["y=/m.gguf"] }), "--translation-model / KILN_TRANSLATION_MODEL", '"x" is not one of the --serve ids');
    expect(agent({ translationModel: "y", serve: ["y=/m.gguf"] }).serve).toEqual([{ id: "y", path: "/m.gguf" }]);
    expect(agent({ translationModel: "b", serve: ["a=/1.gguf", "b=/2.gguf"] }).translationModel).toBe("b"); // any --serve id, not only the first
    expect(agent({ serve: "a=/1.gguf,b=/2.gguf" }).serve).toEqual([
      { id: "a", path: "/1.gguf" },
      { id: "b", path: "/2.gguf" },
    ]);
    expect(agent({ serve: "a=/1.gguf,,b=/2.gguf," }).serve).toEqual([
      { id: "a", path: "/1.gguf" },
      { id: "b", path: "/2.gguf" },
    ]); // empty items skipped
    for (const bad of ["=x", "x=", "nothing"])
      refusal(() => agent({ serve: [bad] }), "--serve / KILN_SERVE", `expected ID=GGUF (e.g. famB-v3.1=./model.gguf or famB-v3.1=hf:org/repo/file.gguf), got "${bad}"`);
  });

  it("models from a hub: --serve ID=hf:…, --pull, --hub-url and --whisper-catalog are checked before anything starts", () => {
    expect(agent({ serve: ["famB-v3.1=hf:acme/chat-GGUF/chat.Q4.gguf"] }).serve).toEqual([
      { id: "famB-v3.1", path: "hf:acme/chat-GGUF/chat.Q4.gguf", ref: "hf:acme/chat-GGUF/chat.Q4.gguf" },
    ]);
    refusal(
      () => agent({ serve: ["famB-v3.1=hf:acme/chat-GGUF/../../etc/passwd.gguf"] }),
      "--serve / KILN_SERVE",
      /is not a model reference: the file path has an empty, hidden or malformed part/,
    );
    expect(agent({ pull: ["whisper:small,whisper:large-v2", "hf:acme/chat-GGUF:Q4_K_M", "speech:silero-vad"] }).pull.map((r) => r.ref)).toEqual([
      "whisper:small",
      "whisper:large-v2",
      "hf:acme/chat-GGUF:Q4_K_M",
      "speech:silero-vad",
    ]);
    refusal(
      () => agent({ pull: ["speech:vad"] }),
      "--pull / KILN_PULL",
      /speech:vad is not a speech model Kiln knows \(silero-vad, pyannote-segmentation-3.0, 3dspeaker-eres2net-base\)/,
    );
    refusal(() => agent({ pull: ["whisper:tiny"] }), "--pull / KILN_PULL", /whisper:tiny is not in the whisper catalog \(base, small, /);
    refusal(() => agent({ pull: ["ollama:llama3"] }), "--pull / KILN_PULL", /starts with none of "whisper:", "speech:" and "hf:"/);
    refusal(() => agent({ pull: ["whisper:small"], offline: "true" }), "--pull / KILN_PULL", "contradicts --offline (which never downloads): give one or the other");
    expect(agent({ fetchModels: "small,large-v3-turbo" }).fetchModels).toEqual(["small", "large-v3-turbo"]);
    refusal(
      () => agent({ fetchModels: "small,tiny" }),
      "--fetch-models / KILN_FETCH_MODELS",
      /^--fetch-models \/ KILN_FETCH_MODELS: tiny not in the whisper catalog \(base, small/,
    );
    refusal(() => agent({ fetchModels: "small", offline: "true" }), "--fetch-models / KILN_FETCH_MODELS", "contradicts --offline (which never downloads): give one or the other");
    expect(agent({}).hubUrl).toBe("https://huggingface.co");
    expect(agent({ hubUrl: "http://mirror.internal:8080/hf/" }).hubUrl).toBe("http://mirror.internal:8080/hf");
    expect(agent({ hubUrl: "https://mirror.internal/hf//" }).hubUrl).toBe("https://mirror.internal/hf"); // every trailing slash
    for (const bad of ["ftp://hub", "git+https://hub", "https://user:pw@hub", "https://hub/?x=1", "hub"])
      refusal(() => agent({ hubUrl: bad }), "--hub-url / KILN_HUB_URL", /expected an http\(s\) URL/);
    expect(maskSecrets(AGENT_OPTIONS, agent({ hfToken: "hf_secret_value_123" }))).toMatchObject({ hfToken: "[redacted]" });

    const dir = mkdtempSync(join(tmpdir(), "kiln-catalog-"));
    const file = (entries: unknown) => {
      const path = join(dir, `${Math.random()}.json`);
      writeFileSync(path, JSON.stringify(entries));
      return path;
    };
    const good = { name: "large-v3-de", repo: "acme/whisper-de", file: "ggml-large-v3-de.bin", sha256: "c".repeat(64), size_bytes: 3_000_000_000, languages: 1 };
    const catalog = agent({ whisperCatalog: file([good, { ...good, name: "base", file: "ggml-base-mirror.bin", revision: "v1.2" }]) }).whisperCatalog;
    expect(catalog.get("large-v3-de")).toMatchObject({ repo: "acme/whisper-de", file: "ggml-large-v3-de.bin", size: "3000MB", sizeBytes: 3_000_000_000, languages: 1 });
    expect(catalog.get("base")).toMatchObject({ file: "ggml-base-mirror.bin", revision: "v1.2" }); // replaced in place
    expect(catalog.names.slice(0, 2)).toEqual(["base", "small"]);
    const bad: [unknown, RegExp][] = [
      [[{ ...good, file: "../../etc/cron.d/x" }], /\[0\]\.file: must be a plain file name/],
      [[{ ...good, repo: "acme/../x" }], /\[0\]\.repo: must be org\/name/],
      [[{ ...good, sha256: "abc" }], /\[0\]\.sha256: must be 64 hex digits/],
      [[{ ...good, revision: "../main" }], /\[0\]\.revision: must be a branch/],
      [[{ ...good, extra: 1 }], /Unrecognized key/],
      [[good, good], /"large-v3-de" is listed twice/],
      [[{ ...good, file: "ggml-base.bin" }], /both name ggml-base.bin with different sha256/],
      [{ not: "an array" }, /\(top\)/],
    ];
    for (const [entries, message] of bad) refusal(() => agent({ whisperCatalog: file(entries) }), "--whisper-catalog / KILN_WHISPER_CATALOG", message);
  });
});

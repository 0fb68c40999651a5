/**
 * The fleet link is authenticated and private: gRPC over TLS (and mutual TLS), plaintext only on
 * loopback or with --grpc-insecure, node tokens bound to node ids, and no eviction of a connected
 * node by a connection with another token. Real in-process schedulers and agents on loopback
 * ports; certificates are made here with the openssl CLI.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import * as grpc from "@grpc/grpc-js";
import { pino } from "pino";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { AGENT_OPTIONS, SCHEDULER_OPTIONS, formatHostPort, isLoopback, nodeIdMatcher, parseAgentConfig, parseNodeTokenEntry, parseSchedulerConfig } from "../config/index.js";
import { agentChannelCredentials, schedulerServerCredentials } from "../config/tls.js";
import { addOptions } from "../cli/options.js";
import { ConfigError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { fleetProto, NODE_TOKEN_METADATA, type SchedulerMessage__Output } from "../proto/index.js";
import { startAgent, type AgentHandle } from "../agent/index.js";
import { startScheduler, type SchedulerHandle } from "../scheduler/index.js";
import type { LinkState } from "../agent/link/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, NODE_TOKEN, postChat, tempDir, until, waitForAgents } from "./helpers/fleet.js";

const TOKEN_A = "tenant-a-node-token-0123456789";
const TOKEN_B = "tenant-b-node-token-9876543210";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** A logger whose JSON lines are kept, to check what was logged (and that no token was). */
function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: pino({ level: "info" }, { write: (l: string) => void lines.push(l) }) as unknown as Logger, lines };
}

// --- certificates --------------------------------------------------------------------------

interface Certs {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  otherCa: string;
  otherClientCert: string;
  otherClientKey: string;
  /** A client certificate whose CN is "named" and whose DNS name is gpu-7. */
  namedCert: string;
  namedKey: string;
}
let certs: Certs;

function makeCerts(): Certs {
  const dir = tempDir();
  const f = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const ca = (name: string) =>
    ssl(
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      f(`${name}.key`),
      "-out",
      f(`${name}.crt`),
      "-days",
      "2",
      "-subj",
      `/CN=${name}`,
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign",
    );
  const leaf = (name: string, signer: string, ext: string) => {
    writeFileSync(f(`${name}.ext`), ext);
    ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f(`${name}.key`), "-out", f(`${name}.csr`), "-subj", `/CN=${name}`);
    ssl(
      "x509",
      "-req",
      "-in",
      f(`${name}.csr`),
      "-CA",
      f(`${signer}.crt`),
      "-CAkey",
      f(`${signer}.key`),
      "-CAcreateserial",
      "-out",
      f(`${name}.crt`),
      "-days",
      "2",
      "-extfile",
      f(`${name}.ext`),
    );
  };
  ca("ca");
  ca("other-ca");
  leaf("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n");
  leaf("client", "ca", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n");
  leaf("other-client", "other-ca", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n");
  leaf("named", "ca", "subjectAltName=DNS:gpu-7\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n");
  return {
    ca: f("ca.crt"),
    serverCert: f("server.crt"),
    serverKey: f("server.key"),
    clientCert: f("client.crt"),
    clientKey: f("client.key"),
    otherCa: f("other-ca.crt"),
    otherClientCert: f("other-client.crt"),
    otherClientKey: f("other-client.key"),
    namedCert: f("named.crt"),
    namedKey: f("named.key"),
  };
}

beforeAll(() => {
  certs = makeCerts();
});

// --- helpers -------------------------------------------------------------------------------

const tlsScheduler = (extra: Record<string, string> = {}) => inProcessScheduler({ grpcTlsCert: certs.serverCert, grpcTlsKey: certs.serverKey, ...extra });

/** An in-process agent whose link states are recorded from its first dial on. */
async function recordedAgent(scheduler: SchedulerHandle, raw: Record<string, string | string[]>): Promise<{ agent: AgentHandle; states: LinkState[] }> {
  const agent = await inProcessAgent(scheduler, raw);
  cleanups.push(() => agent.close());
  const states: LinkState[] = [agent.links!.links[0]!.state];
  agent.links!.links[0]!.on("state", (s) => states.push(s));
  return { agent, states };
}

/** An agent that tried (its link went down at least twice) and never got in. */
async function expectNeverJoins(scheduler: SchedulerHandle, nodeId: string, states: LinkState[]): Promise<void> {
  await until(() => states.filter((s) => s === "disconnected").length >= 2, 10_000, `${nodeId} to be refused twice`);
  expect(states).not.toContain("connected");
  expect(scheduler.fleet.snapshot().map((a) => a.nodeId)).not.toContain(nodeId);
}

interface RawConnection {
  /** "registered", or the gRPC status code that ended the stream before it was registered. */
  outcome: Promise<"registered" | grpc.status>;
  /** The status code that ended the stream (after registration too). */
  ended: Promise<grpc.status>;
  close(): void;
}

/** A bare Fleet/Connect stream that presents `token` and registers `nodeId` with one pool of the test model. */
function rawConnect(scheduler: SchedulerHandle, token: string, nodeId: string): RawConnection {
  const Fleet = fleetProto().kiln.v1.Fleet;
  const client = new Fleet(formatHostPort(scheduler.grpc), grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set(NODE_TOKEN_METADATA, `Bearer ${token}`);
  const call = client.Connect(metadata);
  let settle!: (o: "registered" | grpc.status) => void;
  const outcome = new Promise<"registered" | grpc.status>((r) => {
    settle = r;
  });
  const ended = new Promise<grpc.status>((r) => {
    call.on("status", (s: grpc.StatusObject) => {
      settle(s.code);
      r(s.code);
    });
  });
  call.on("error", () => undefined);
  call.on("data", (m: SchedulerMessage__Output) => {
    if (m.registered) settle("registered");
  });
  call.write({ register: { node_id: nodeId, agent_version: "test", pools: [{ model_ids: [MODEL_ID], slots: 1, context_size: 2048 }] } });
  const close = () => {
    call.cancel();
    client.close();
  };
  cleanups.push(async () => close());
  return { outcome, ended, close };
}

async function chatWorks(scheduler: SchedulerHandle): Promise<void> {
  const key = (await scheduler.keys.create({ account: "t", tier: "pro" })).token;
  const res = await postChat(httpBase(scheduler), key, { model: MODEL_ID, messages: [{ role: "user", content: "Hello" }], max_tokens: 5, temperature: 0 });
  expect(res.status).toBe(200);
  expect(res.body.choices[0].message.content.length).toBeGreaterThan(0);
  expect(res.body.usage.completion_tokens).toBeGreaterThan(0);
}

// --- TLS -----------------------------------------------------------------------------------

describe("gRPC over TLS", () => {
  it("a chat completion round trip through a TLS fleet (agent with --scheduler-ca) returns text", async () => {
    const { logger, lines } = capturingLogger();
    const scheduler = await startScheduler(
      parseSchedulerConfig({
        http: "127.0.0.1:0",
        grpc: "127.0.0.1:0",
        db: join(tempDir(), "kiln.db"),
        nodeTokens: NODE_TOKEN,
        heartbeatMs: "500",
        grpcTlsCert: certs.serverCert,
        grpcTlsKey: certs.serverKey,
      }),
      logger,
    );
    cleanups.push(() => scheduler.close());
    expect(lines.find((l) => l.includes("scheduler listening"))).toContain('"grpcTls":"server"');
    const { agent } = await recordedAgent(scheduler, { nodeId: "tls-node", schedulerCa: certs.ca });
    await waitForAgents(scheduler, 1);
    await until(() => agent.links!.links[0]!.state === "connected", 5000, "the agent's link to be registered");
    await chatWorks(scheduler);
  });

  it("the TLS port does not serve plaintext: a plaintext agent never joins", async () => {
    const scheduler = await tlsScheduler();
    cleanups.push(() => scheduler.close());
    const { states } = await recordedAgent(scheduler, { nodeId: "plain-node" });
    await expectNeverJoins(scheduler, "plain-node", states);
  });

  it("an agent trusting the wrong CA never joins", async () => {
    const scheduler = await tlsScheduler();
    cleanups.push(() => scheduler.close());
    const { states } = await recordedAgent(scheduler, { nodeId: "wrong-ca", schedulerCa: certs.otherCa });
    await expectNeverJoins(scheduler, "wrong-ca", states);
  });

  it("with --grpc-client-ca, agents without a client certificate or with one from another CA never join; one with a good certificate does", async () => {
    const scheduler = await tlsScheduler({ grpcClientCa: certs.ca });
    cleanups.push(() => scheduler.close());
    // the certificate's CN is its node id (a certificate is bound to its node id: see the next test)
    const good = await recordedAgent(scheduler, { nodeId: "client", schedulerCa: certs.ca, tlsCert: certs.clientCert, tlsKey: certs.clientKey });
    const none = await recordedAgent(scheduler, { nodeId: "no-cert", schedulerCa: certs.ca });
    const other = await recordedAgent(scheduler, { nodeId: "other-ca-cert", schedulerCa: certs.ca, tlsCert: certs.otherClientCert, tlsKey: certs.otherClientKey });
    await until(() => scheduler.fleet.snapshot().some((a) => a.nodeId === "client"), 15_000, "the agent with a good certificate to join");
    await expectNeverJoins(scheduler, "no-cert", none.states);
    await expectNeverJoins(scheduler, "other-ca-cert", other.states);
    expect(scheduler.fleet.snapshot().map((a) => a.nodeId)).toEqual(["client"]);
    await until(() => good.agent.links!.links[0]!.state === "connected", 5000, "the good agent's link to be registered");
    await chatWorks(scheduler);
  });

  it("with --grpc-client-ca, a certificate registers only the node id its CN or a DNS name gives, whatever its token allows", async () => {
    const scheduler = await tlsScheduler({ grpcClientCa: certs.ca });
    cleanups.push(() => scheduler.close());
    const tls = (cert: string, key: string) => ({ schedulerCa: certs.ca, tlsCert: cert, tlsKey: key });
    const posing = await recordedAgent(scheduler, { nodeId: "gpu-7", ...tls(certs.clientCert, certs.clientKey) });
    const named = await recordedAgent(scheduler, { nodeId: "gpu-7", ...tls(certs.namedCert, certs.namedKey) });
    await until(() => scheduler.fleet.snapshot().some((a) => a.nodeId === "gpu-7"), 15_000, "the agent whose certificate names gpu-7 to join");
    await until(() => named.agent.links!.links[0]!.state === "connected", 5000, "its link to be registered");
    // the one whose certificate is "client" never got in: only its link went down
    await until(() => posing.states.filter((s) => s === "disconnected").length >= 2, 10_000, "the posing agent to be refused twice");
    expect(posing.states).not.toContain("connected");
  });
});

// --- node tokens ---------------------------------------------------------------------------

describe("node tokens", () => {
  it("a wrong node token cannot join (UNAUTHENTICATED)", async () => {
    const scheduler = await inProcessScheduler({ nodeTokens: TOKEN_A });
    cleanups.push(() => scheduler.close());
    expect(await rawConnect(scheduler, TOKEN_B, "gpu-a").outcome).toBe(grpc.status.UNAUTHENTICATED);
    const { states } = await recordedAgent(scheduler, { nodeId: "gpu-a", nodeToken: TOKEN_B });
    await expectNeverJoins(scheduler, "gpu-a", states);
  });

  it("a token bound to gpu-a cannot register gpu-b (PERMISSION_DENIED, warned, token never logged), but registers gpu-a", async () => {
    const { logger, lines } = capturingLogger();
    const scheduler = await startScheduler(
      parseSchedulerConfig({
        http: "127.0.0.1:0",
        grpc: "127.0.0.1:0",
        db: join(tempDir(), "kiln.db"),
        nodeTokens: `gpu-a=${TOKEN_A},rack-*|spare=${TOKEN_B}`,
        heartbeatMs: "500",
      }),
      logger,
    );
    cleanups.push(() => scheduler.close());

    expect(await rawConnect(scheduler, TOKEN_A, "gpu-b").outcome).toBe(grpc.status.PERMISSION_DENIED);
    expect(scheduler.fleet.snapshot()).toHaveLength(0);
    const warn = lines.map((l) => JSON.parse(l) as { level: number; msg: string; node?: string }).find((l) => l.msg.includes("may not register"));
    expect(warn).toMatchObject({ level: 40, node: "gpu-b" });
    // Globs and |-separated lists.
    expect(await rawConnect(scheduler, TOKEN_B, "gpu-a").outcome).toBe(grpc.status.PERMISSION_DENIED);
    expect(await rawConnect(scheduler, TOKEN_B, "rack-7").outcome).toBe("registered");
    expect(await rawConnect(scheduler, TOKEN_B, "spare").outcome).toBe("registered");

    // A real agent with the bound token and the wrong node id never joins; with the right one it serves.
    const wrong = await recordedAgent(scheduler, { nodeId: "gpu-b", nodeToken: TOKEN_A });
    await expectNeverJoins(scheduler, "gpu-b", wrong.states);
    await recordedAgent(scheduler, { nodeId: "gpu-a", nodeToken: TOKEN_A });
    await until(() => scheduler.fleet.snapshot().some((a) => a.nodeId === "gpu-a"), 15_000, "gpu-a to join");
    expect(lines.join("\n")).not.toContain(TOKEN_A);
    expect(lines.join("\n")).not.toContain(TOKEN_B);
  });

  it("parses bare tokens (with = padding), IDS=TOKEN entries and globs", () => {
    expect(parseNodeTokenEntry("abcdefghijklmnopqrstuvwx==")).toEqual({ token: "abcdefghijklmnopqrstuvwx==" });
    expect(parseNodeTokenEntry("a+b/cdefghijklmnop=qrstuvwxyz0123456789")).toEqual({ token: "a+b/cdefghijklmnop=qrstuvwxyz0123456789" });
    expect(parseNodeTokenEntry(`gpu-1|gpu-2=${TOKEN_A}`)).toEqual({ token: TOKEN_A, nodeIds: ["gpu-1", "gpu-2"] });
    const c = parseSchedulerConfig({ nodeTokens: `gpu-1|gpu-2=${TOKEN_A},gpu-*=${TOKEN_B},${NODE_TOKEN}` });
    expect(c.nodeTokens).toEqual([{ token: TOKEN_A, nodeIds: ["gpu-1", "gpu-2"] }, { token: TOKEN_B, nodeIds: ["gpu-*"] }, { token: NODE_TOKEN }]);
    const glob = nodeIdMatcher(["gpu-*", "a.b"]);
    expect(["gpu-1", "gpu-", "a.b"].map(glob)).toEqual([true, true, true]);
    expect(["gpu", "xgpu-1", "aXb"].map(glob)).toEqual([false, false, false]);
    expect(nodeIdMatcher(undefined)("anything")).toBe(true);
    expect(() => parseSchedulerConfig({ nodeTokens: "gpu-a=short" })).toThrow(/--node-tokens \/ KILN_NODE_TOKENS: each token must be at least 16/);
    // A token never goes into an error message.
    expect(() => parseSchedulerConfig({ nodeTokens: `|=${TOKEN_A}` })).toThrow(/entry 1/);
    try {
      parseSchedulerConfig({ nodeTokens: `|=${TOKEN_A}` });
    } catch (err) {
      expect((err as Error).message).not.toContain(TOKEN_A);
    }
  });
});

// --- eviction ------------------------------------------------------------------------------

describe("one node id, one token", () => {
  it("a node connected with token A is not evicted by a connection presenting token B for the same node id", async () => {
    const scheduler = await inProcessScheduler({ nodeTokens: `${TOKEN_A},${TOKEN_B}` });
    cleanups.push(() => scheduler.close());
    const { states } = await recordedAgent(scheduler, { nodeId: "gpu-x", nodeToken: TOKEN_A });
    await waitForAgents(scheduler, 1);
    const before = scheduler.fleet.snapshot()[0]!;

    const intruder = rawConnect(scheduler, TOKEN_B, "gpu-x");
    expect(await intruder.outcome).toBe(grpc.status.ALREADY_EXISTS);
    const after = scheduler.fleet.snapshot();
    expect(after).toHaveLength(1);
    expect(after[0]).toMatchObject({ nodeId: "gpu-x", connectedAt: before.connectedAt });
    expect(states.filter((s) => s === "disconnected")).toHaveLength(0); // the connected agent's stream was never touched
    await chatWorks(scheduler);
  });

  it("the same token does replace the connection (an agent reconnecting)", async () => {
    const scheduler = await inProcessScheduler({ nodeTokens: `${TOKEN_A},${TOKEN_B}` });
    cleanups.push(() => scheduler.close());
    const first = rawConnect(scheduler, TOKEN_A, "gpu-y");
    expect(await first.outcome).toBe("registered");
    const firstAt = scheduler.fleet.snapshot()[0]!.connectedAt;
    await new Promise((r) => setTimeout(r, 5));
    const second = rawConnect(scheduler, TOKEN_A, "gpu-y");
    expect(await second.outcome).toBe("registered");
    expect(await first.ended).toBe(grpc.status.ABORTED); // "replaced by a new connection"
    const snap = scheduler.fleet.snapshot();
    expect(snap).toHaveLength(1);
    expect(snap[0]!.connectedAt).toBeGreaterThan(firstAt);
  });
});

// --- configuration -------------------------------------------------------------------------

describe("configuration refusals", () => {
  const tokens = { nodeTokens: NODE_TOKEN };
  const agentBase = { nodeToken: NODE_TOKEN, host: "127.0.0.1" };

  it("loopback is 127.0.0.0/8, ::1 and localhost", () => {
    expect(["127.0.0.1", "127.9.8.7", "::1", "localhost", "LOCALHOST"].map(isLoopback)).toEqual([true, true, true, true, true]);
    expect(["0.0.0.0", "::", "10.0.0.5", "128.0.0.1", "scheduler.example", "::ffff:10.0.0.1"].map(isLoopback)).toEqual([false, false, false, false, false, false]);
  });

  it("the scheduler refuses plaintext on a non-loopback --grpc without --grpc-insecure", () => {
    const refuse = (raw: Record<string, string | boolean>) => expect(() => parseSchedulerConfig({ ...tokens, ...raw })).toThrow(ConfigError);
    refuse({ grpc: "0.0.0.0:50051" });
    refuse({ grpc: "0.0.0.0:50051", grpcInsecure: "0" });
    refuse({ grpc: "0.0.0.0:50051", grpcInsecure: "false" });
    expect(() => parseSchedulerConfig({ ...tokens, grpc: "0.0.0.0:50051" })).toThrow(
      /--grpc \/ KILN_GRPC: 0\.0\.0\.0 is not a loopback address.*--grpc-tls-cert and --grpc-tls-key.*--grpc-insecure/,
    );
    expect(() => parseSchedulerConfig({ ...tokens, grpc: "0.0.0.0:50051", grpcInsecure: "maybe" })).toThrow(/--grpc-insecure \/ KILN_GRPC_INSECURE: expected true, false, 1 or 0/);
    for (const on of [true, "true", "1"]) expect(parseSchedulerConfig({ ...tokens, grpc: "0.0.0.0:50051", grpcInsecure: on }).grpcInsecure).toBe(true);
    expect(parseSchedulerConfig({ ...tokens, grpc: "0.0.0.0:50051", grpcTlsCert: "c.pem", grpcTlsKey: "k.pem" }).grpcTlsCert).toBe("c.pem");
    for (const grpc of ["127.0.0.1:1", "[::1]:1", "localhost:1"]) expect(parseSchedulerConfig({ ...tokens, grpc }).grpcInsecure).toBe(false);
  });

  it("the agent refuses to dial a non-loopback --scheduler in plaintext without --grpc-insecure", () => {
    expect(() => parseAgentConfig({ ...agentBase, scheduler: "10.0.0.5:50051" })).toThrow(ConfigError);
    expect(() => parseAgentConfig({ ...agentBase, scheduler: "scheduler.example:50051", grpcInsecure: "0" })).toThrow(
      /--scheduler \/ KILN_SCHEDULER: scheduler\.example is not a loopback address.*--scheduler-ca.*--grpc-insecure/,
    );
    expect(parseAgentConfig({ ...agentBase, scheduler: "10.0.0.5:50051", grpcInsecure: true }).grpcInsecure).toBe(true);
    expect(parseAgentConfig({ ...agentBase, scheduler: "10.0.0.5:50051", schedulerCa: "ca.pem" }).schedulerCa).toBe("ca.pem");
    expect(parseAgentConfig({ ...agentBase, scheduler: "localhost:50051" }).grpcInsecure).toBe(false);
  });

  it("KILN_GRPC_INSECURE=0 is off and a bare --grpc-insecure flag is on (through the CLI's options)", () => {
    const parse = (argv: string[], env: string | undefined) => {
      const saved = process.env.KILN_GRPC_INSECURE;
      if (env === undefined) delete process.env.KILN_GRPC_INSECURE;
      else process.env.KILN_GRPC_INSECURE = env;
      try {
        const cmd = addOptions(new Command("scheduler").exitOverride(), SCHEDULER_OPTIONS);
        cmd.parse(["--grpc", "0.0.0.0:50051", "--node-tokens", NODE_TOKEN, ...argv], { from: "user" });
        return cmd.opts();
      } finally {
        if (saved === undefined) delete process.env.KILN_GRPC_INSECURE;
        else process.env.KILN_GRPC_INSECURE = saved;
      }
    };
    expect(parse(["--grpc-insecure"], undefined).grpcInsecure).toBe(true);
    expect(parseSchedulerConfig(parse(["--grpc-insecure"], undefined)).grpcInsecure).toBe(true);
    expect(parse([], "0").grpcInsecure).toBe("0");
    expect(() => parseSchedulerConfig(parse([], "0"))).toThrow(/--grpc \/ KILN_GRPC: 0\.0\.0\.0 is not a loopback/);
    expect(parseSchedulerConfig(parse([], "1")).grpcInsecure).toBe(true);
    expect(parse([], undefined).grpcInsecure).toBeUndefined();
  });

  it("a certificate without its key (or the reverse), and contradicting flags, are refused naming the flag", () => {
    expect(() => parseSchedulerConfig({ ...tokens, grpcTlsCert: "c.pem" })).toThrow(/--grpc-tls-key \/ KILN_GRPC_TLS_KEY: is required with --grpc-tls-cert/);
    expect(() => parseSchedulerConfig({ ...tokens, grpcTlsKey: "k.pem" })).toThrow(/--grpc-tls-cert \/ KILN_GRPC_TLS_CERT: is required with --grpc-tls-key/);
    expect(() => parseSchedulerConfig({ ...tokens, grpcClientCa: "ca.pem" })).toThrow(/--grpc-client-ca \/ KILN_GRPC_CLIENT_CA: needs --grpc-tls-cert/);
    expect(() => parseSchedulerConfig({ ...tokens, grpcTlsCert: "c.pem", grpcTlsKey: "k.pem", grpcInsecure: true })).toThrow(/--grpc-insecure \/ KILN_GRPC_INSECURE: contradicts/);
    expect(() => parseAgentConfig({ ...agentBase, scheduler: "127.0.0.1:1", schedulerCa: "ca.pem", tlsCert: "c.pem" })).toThrow(
      /--tls-key \/ KILN_TLS_KEY: is required with --tls-cert/,
    );
    expect(() => parseAgentConfig({ ...agentBase, scheduler: "127.0.0.1:1", schedulerCa: "ca.pem", tlsKey: "k.pem" })).toThrow(
      /--tls-cert \/ KILN_TLS_CERT: is required with --tls-key/,
    );
    expect(() => parseAgentConfig({ ...agentBase, scheduler: "127.0.0.1:1", tlsCert: "c.pem", tlsKey: "k.pem" })).toThrow(
      /--scheduler-ca \/ KILN_SCHEDULER_CA: is required with --tls-cert/,
    );
    expect(() => parseAgentConfig({ ...agentBase, scheduler: "127.0.0.1:1", schedulerCa: "ca.pem", grpcInsecure: "1" })).toThrow(
      /--grpc-insecure \/ KILN_GRPC_INSECURE: contradicts/,
    );
  });

  it("a missing or unusable certificate file fails the start with a ConfigError naming the flag", async () => {
    const missing = join(tempDir(), "nope.pem");
    const schedulerConfig = (raw: Record<string, string>) => parseSchedulerConfig({ ...tokens, http: "127.0.0.1:0", grpc: "127.0.0.1:0", db: join(tempDir(), "kiln.db"), ...raw });
    const silent = pino({ level: "silent" }) as unknown as Logger;
    await expect(startScheduler(schedulerConfig({ grpcTlsCert: missing, grpcTlsKey: certs.serverKey }), silent)).rejects.toThrow(
      /--grpc-tls-cert \/ KILN_GRPC_TLS_CERT: cannot read .*nope\.pem.*ENOENT/,
    );
    await expect(startScheduler(schedulerConfig({ grpcTlsCert: certs.serverCert, grpcTlsKey: missing }), silent)).rejects.toBeInstanceOf(ConfigError);
    await expect(startScheduler(schedulerConfig({ grpcTlsCert: certs.serverCert, grpcTlsKey: certs.serverKey, grpcClientCa: missing }), silent)).rejects.toThrow(
      /--grpc-client-ca \/ KILN_GRPC_CLIENT_CA: cannot read/,
    );
    // A key that is not the certificate's.
    await expect(startScheduler(schedulerConfig({ grpcTlsCert: certs.serverCert, grpcTlsKey: certs.clientKey }), silent)).rejects.toThrow(
      /--grpc-tls-cert \/ KILN_GRPC_TLS_CERT, --grpc-tls-key \/ KILN_GRPC_TLS_KEY: not usable PEM/,
    );
    const agentConfig = (raw: Record<string, string>) => parseAgentConfig({ ...agentBase, scheduler: "127.0.0.1:1", host: "127.0.0.1", port: "0", dataDir: tempDir(), ...raw });
    await expect(startAgent(agentConfig({ schedulerCa: missing }), silent)).rejects.toThrow(/--scheduler-ca \/ KILN_SCHEDULER_CA: cannot read/);
    await expect(startAgent(agentConfig({ schedulerCa: certs.ca, tlsCert: certs.clientCert, tlsKey: missing }), silent)).rejects.toThrow(/--tls-key \/ KILN_TLS_KEY: cannot read/);
    await expect(startAgent(agentConfig({ schedulerCa: certs.serverKey }), silent)).rejects.toThrow(/--scheduler-ca \/ KILN_SCHEDULER_CA: not usable PEM/);
  });

  it("--grpc-insecure on a non-loopback address is warned at start, on both sides", () => {
    const s = capturingLogger();
    schedulerServerCredentials(parseSchedulerConfig({ ...tokens, grpc: "0.0.0.0:50051", grpcInsecure: "1" }), s.logger);
    const a = capturingLogger();
    agentChannelCredentials(parseAgentConfig({ ...agentBase, scheduler: "10.0.0.5:50051", grpcInsecure: "1" }), a.logger);
    for (const { lines } of [s, a]) {
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, msg: expect.stringMatching(/^--grpc-insecure: .*plaintext on a non-loopback address/) });
    }
    // On loopback, nothing to warn about.
    const quiet = capturingLogger();
    schedulerServerCredentials(parseSchedulerConfig({ ...tokens }), quiet.logger);
    agentChannelCredentials(parseAgentConfig({ ...agentBase, scheduler: "127.0.0.1:50051" }), quiet.logger);
    expect(quiet.lines).toHaveLength(0);
  });

  it("the options are declared with their KILN_* twins and defaults in their descriptions", () => {
    for (const spec of [
      SCHEDULER_OPTIONS.grpcTlsCert,
      SCHEDULER_OPTIONS.grpcTlsKey,
      SCHEDULER_OPTIONS.grpcClientCa,
      SCHEDULER_OPTIONS.grpcInsecure,
      AGENT_OPTIONS.schedulerCa,
      AGENT_OPTIONS.tlsCert,
      AGENT_OPTIONS.tlsKey,
      AGENT_OPTIONS.grpcInsecure,
    ]) {
      expect(spec.env).toMatch(/^KILN_[A-Z_]+$/);
      expect(spec.description).toMatch(/\(default: /);
    }
  });
});

// --- a hostile agent's function calls ------------------------------------------------------

describe("function calls from an agent", () => {
  /** An agent with the tools capability that answers every completion with `pieces` of calls (and a done). */
  function callingAgent(scheduler: SchedulerHandle, pieces: { index: number; name?: string; arguments: string }[]): void {
    const Fleet = fleetProto().kiln.v1.Fleet;
    const client = new Fleet(formatHostPort(scheduler.grpc), grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set(NODE_TOKEN_METADATA, `Bearer ${NODE_TOKEN}`);
    const call = client.Connect(metadata);
    call.on("error", () => undefined);
    call.on("data", (m: SchedulerMessage__Output) => {
      if (!m.completion) return;
      const id = m.completion.request_id;
      call.write({ chunk: { request_id: id, text: "", tool_calls: pieces } });
      call.write({ done: { request_id: id, finish_reason: "tool_calls", usage: { prompt_tokens: 1, completion_tokens: 1 } } });
    });
    call.write({ register: { node_id: "hostile", agent_version: "test", pools: [{ model_ids: [MODEL_ID], slots: 1, context_size: 2048, capabilities: ["tools"] }] } });
    cleanups.push(async () => {
      call.cancel();
      client.close();
    });
  }

  it("opens calls in order only: a piece at index 1e9 (which sized an array and aborted the scheduler) is dropped; calls on a request without tools are dropped", async () => {
    const scheduler = await inProcessScheduler({ nodeTokens: NODE_TOKEN });
    cleanups.push(() => scheduler.close());
    callingAgent(scheduler, [
      { index: 0, name: "f", arguments: "{" },
      { index: 1_000_000_000, name: "g", arguments: "{}" },
      { index: 3, name: "g", arguments: "{}" },
      { index: 0, arguments: "}" },
      { index: 7, arguments: "x" },
    ]);
    await waitForAgents(scheduler, 1);
    const key = (await scheduler.keys.create({ account: "t", tier: "pro" })).token;
    const tools = [
      { type: "function", function: { name: "f" } },
      { type: "function", function: { name: "g" } },
    ];
    for (const stream of [false, true]) {
      const res = await postChat(httpBase(scheduler), key, { model: MODEL_ID, messages: [{ role: "user", content: "go" }], tools, stream });
      expect(res.status).toBe(200);
      if (!stream) expect(res.body.choices[0].message.tool_calls).toEqual([{ id: expect.stringMatching(/^call_/), type: "function", function: { name: "f", arguments: "{}" } }]);
    }
    const plain = await postChat(httpBase(scheduler), key, { model: MODEL_ID, messages: [{ role: "user", content: "go" }] });
    expect(plain.status).toBe(200);
    expect(plain.body.choices[0].message).toEqual({ role: "assistant", content: "", refusal: null });
  });
});

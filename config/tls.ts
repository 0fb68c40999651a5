/**
 * The fleet link's transport security: the certificate files named by the configuration, read at
 * start into gRPC credentials. A file that cannot be read, or PEM that does not load, is a
 * `ConfigError` naming the flag and its variable.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext, type SecureContextOptions } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { ConfigError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { formatHostPort, isLoopback } from "../core/net.js";
import { AGENT_OPTIONS, type AgentConfig } from "./agent.js";
import { optionName, type OptionSpec } from "./option-table.js";
import { SCHEDULER_OPTIONS, type SchedulerConfig } from "./scheduler.js";

/** Reads the file an option names. */
function readOptionFile(spec: OptionSpec, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(optionName(spec), `cannot read "${path}"${code ? ` (${code})` : ""}`);
  }
}

/** Loads PEM into a TLS context, so that a bad file fails the start rather than every handshake. */
function checkPem(specs: OptionSpec[], options: SecureContextOptions): void {
  try {
    // A TLS context takes a CA file without a certificate in it silently: parse one.
    if (options.ca) new X509Certificate(options.ca as Buffer);
    createSecureContext(options);
  } catch (err) {
    throw new ConfigError(specs.map(optionName).join(", "), `not usable PEM: ${(err as Error).message}`);
  }
}

/**
 * The scheduler's gRPC server credentials: TLS with `--grpc-tls-cert`/`--grpc-tls-key`, verifying
 * agents' client certificates against `--grpc-client-ca` when given; otherwise plaintext (which
 * `parseSchedulerConfig` allows only on loopback or with `--grpc-insecure`, warned here).
 */
export function schedulerServerCredentials(config: SchedulerConfig, logger: Logger): grpc.ServerCredentials {
  const o = SCHEDULER_OPTIONS;
  if (!config.grpcTlsCert || !config.grpcTlsKey) {
    if (!isLoopback(config.grpc.host)) {
      logger.warn(
        { grpc: formatHostPort(config.grpc) },
        "--grpc-insecure: the gRPC port serves plaintext on a non-loopback address; node tokens and prompts cross the network unencrypted (use --grpc-tls-cert and --grpc-tls-key)",
      );
    }
    return grpc.ServerCredentials.createInsecure();
  }
  const cert = readOptionFile(o.grpcTlsCert, config.grpcTlsCert);
  const key = readOptionFile(o.grpcTlsKey, config.grpcTlsKey);
  const ca = config.grpcClientCa ? readOptionFile(o.grpcClientCa, config.grpcClientCa) : null;
  checkPem([o.grpcTlsCert], { cert });
  checkPem([o.grpcTlsKey], { key });
  checkPem([o.grpcTlsCert, o.grpcTlsKey], { cert, key });
  if (ca) checkPem([o.grpcClientCa], { ca });
  return grpc.ServerCredentials.createSsl(ca, [{ cert_chain: cert, private_key: key }], ca !== null);
}

/**
 * The agent's channel credentials: TLS verifying the scheduler with `--scheduler-ca` (presenting
 * `--tls-cert`/`--tls-key` when given); otherwise plaintext (which `parseAgentConfig` allows only
 * to a loopback scheduler or with `--grpc-insecure`, warned here).
 */
export function agentChannelCredentials(config: AgentConfig, logger: Logger): grpc.ChannelCredentials {
  const o = AGENT_OPTIONS;
  if (!config.schedulerCa) {
    for (const scheduler of config.scheduler?.filter((s) => !isLoopback(s.host)) ?? []) {
      logger.warn(
        { scheduler: formatHostPort(scheduler) },
        "--grpc-insecure: dialing the scheduler in plaintext on a non-loopback address; the node token and prompts cross the network unencrypted (use --scheduler-ca)",
      );
    }
    return grpc.credentials.createInsecure();
  }
  const ca = readOptionFile(o.schedulerCa, config.schedulerCa);
  checkPem([o.schedulerCa], { ca });
  if (!config.tlsCert || !config.tlsKey) return grpc.credentials.createSsl(ca);
  const cert = readOptionFile(o.tlsCert, config.tlsCert);
  const key = readOptionFile(o.tlsKey, config.tlsKey);
  checkPem([o.tlsCert], { cert });
  checkPem([o.tlsKey], { key });
  checkPem([o.tlsCert, o.tlsKey], { cert, key });
  return grpc.credentials.createSsl(ca, key, cert);
}

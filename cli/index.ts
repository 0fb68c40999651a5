/**
 * The `kiln` command: `dev`, `scheduler`, `agent`, `keys`, `models`. Every flag has a `KILN_*` twin;
 * configuration is validated by `config/` before anything starts.
 */
import { Command, Option } from "commander";
import { AGENT_OPTIONS, MODELS_OPTIONS, SCHEDULER_OPTIONS, maskSecrets, parseAgentConfig, parseModelsConfig, parseSchedulerConfig, type OptionSpec } from "../config/index.js";
import { ConfigError, KilnError } from "../core/errors.js";
import { createLogger } from "../core/log.js";
import { SPEECH_MODELS } from "../models/speech.js";
import { KeyService, TIERS, isTier } from "../scheduler/auth/index.js";
import { openStore } from "../scheduler/store/index.js";
import { withConfigFile } from "./config-file.js";
import { addOptions } from "./options.js";
import { onShutdown } from "./shutdown.js";

type Raw = Record<string, string | string[] | undefined>;

const program = new Command("kiln").description("Kiln: chat completions and transcription on a fleet of GPU nodes").showHelpAfterError();

/** `--config FILE` and `--print-config`, on every command that starts a server. */
function withConfigOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option("--config <file>", "a JSON file of options (flags and KILN_* variables win over it)").env("KILN_CONFIG"))
    .option("--print-config", "print the effective configuration (secrets masked) and exit");
}

/** Prints the effective configuration when asked; returns whether it did. */
function printed(opts: Raw, specs: Record<string, OptionSpec>, config: Record<string, unknown>): boolean {
  if (!opts.printConfig) return false;
  process.stdout.write(`${JSON.stringify(maskSecrets(specs, config), null, 2)}\n`);
  return true;
}

/** `kiln dev`'s agent: its transcription API stays on this machine unless `--host` says otherwise. */
const DEV_AGENT_OPTIONS = { ...AGENT_OPTIONS, host: { ...AGENT_OPTIONS.host, default: "127.0.0.1" } };
const DEV_OPTIONS = { ...DEV_AGENT_OPTIONS, ...SCHEDULER_OPTIONS };

withConfigOptions(
  addOptions(addOptions(program.command("dev").description("scheduler + agent on this machine; prints a dev API key"), SCHEDULER_OPTIONS), DEV_AGENT_OPTIONS, [
    "scheduler",
    "nodeToken",
    "logLevel",
    "drainSeconds",
    "grpcInsecure",
    // the scheduler's, one hub for both halves
    "hubUrl",
    "hfToken",
  ]),
).action(async (opts: Raw, cmd: Command) => {
  const raw = withConfigFile(opts, cmd, DEV_OPTIONS);
  if (
    printed(raw, DEV_OPTIONS, {
      ...parseAgentConfig({ ...raw, scheduler: undefined, nodeToken: undefined }),
      ...parseSchedulerConfig({ ...raw, nodeTokens: raw.nodeTokens ?? "generated-at-start-by-kiln-dev" }),
    })
  )
    return;
  // each command loads only its own half (the agent's engines, the scheduler's integrations): `kiln keys` and `--help` start in a fraction of the time
  const { runDev } = await import("./dev.js");
  return runDev(raw);
});

withConfigOptions(addOptions(program.command("scheduler").description("the control plane: public HTTP API and the gRPC endpoint agents dial"), SCHEDULER_OPTIONS)).action(
  async (opts: Raw, cmd: Command) => {
    const config = parseSchedulerConfig(withConfigFile(opts, cmd, SCHEDULER_OPTIONS));
    if (printed(opts, SCHEDULER_OPTIONS, config)) return;
    const logger = createLogger("scheduler", config.logLevel);
    const { startScheduler } = await import("../scheduler/index.js");
    const scheduler = await startScheduler(config, logger);
    onShutdown(logger, () => scheduler.close(config.drainSeconds * 1000));
  },
);

withConfigOptions(addOptions(program.command("agent").description("a GPU node: transcription on :7860; with --scheduler, chat models in the fleet"), AGENT_OPTIONS)).action(
  async (opts: Raw, cmd: Command) => {
    const config = parseAgentConfig(withConfigFile(opts, cmd, AGENT_OPTIONS));
    if (printed(opts, AGENT_OPTIONS, config)) return;
    const logger = createLogger("agent", config.logLevel);
    const { startAgent } = await import("../agent/index.js");
    const agent = await startAgent(config, logger);
    onShutdown(logger, () => agent.close(config.drainSeconds * 1000));
  },
);

const keys = program.command("keys").description("API keys (works on the scheduler's --db)");
const withKeyService = (cmd: Command): Command => addOptions(cmd, { db: SCHEDULER_OPTIONS.db, dbPool: SCHEDULER_OPTIONS.dbPool, jwtSecret: SCHEDULER_OPTIONS.jwtSecret });
/** Runs `body` with the key service of the scheduler's database, closed afterwards. */
const withKeys = async <T>(opts: Raw, body: (keys: KeyService) => Promise<T>): Promise<T> => {
  const { db, dbPool, jwtSecret, logLevel } = parseSchedulerConfig({ ...opts, nodeTokens: "unused-by-keys-commands" });
  const store = await openStore(db, { poolSize: Math.min(dbPool, 2), logger: createLogger("keys", logLevel) });
  try {
    return await body(await KeyService.open(store, jwtSecret));
  } finally {
    await store.close();
  }
};

withKeyService(keys.command("create").description("issue a key (printed once; only its hash is stored)"))
  .requiredOption("--account <name>", "account the key belongs to")
  .requiredOption("--tier <tier>", `account tier (${TIERS.join(", ")})`)
  .option("--rpm <n>", "requests per minute (required for enterprise)")
  .option("--expires-in <seconds>", "lifetime of the key in seconds (default: no expiry)")
  .action(async (opts: Raw) => {
    const tier = String(opts.tier);
    if (!isTier(tier)) throw new ConfigError("--tier", `expected one of ${TIERS.join(", ")}, got "${tier}"`);
    const number = (flag: string, v: unknown): number | undefined => {
      if (v === undefined) return undefined;
      if (!/^\d+$/.test(String(v)) || Number(v) < 1) throw new ConfigError(flag, `expected a whole number of at least 1, got "${String(v)}"`);
      return Number(v);
    };
    const rpm = number("--rpm", opts.rpm);
    const expiresInSeconds = number("--expires-in", opts.expiresIn);
    const { id, token } = await withKeys(opts, (keys) =>
      keys.create({ account: String(opts.account), tier, ...(rpm ? { rpm } : {}), ...(expiresInSeconds ? { expiresInSeconds } : {}) }),
    );
    process.stdout.write(`key id: ${id}\nkey:    ${token}\n`);
  });

withKeyService(keys.command("revoke").description("revoke a key at once").argument("<key-id>")).action(async (keyId: string, opts: Raw) => {
  if (!(await withKeys(opts, (keys) => keys.revoke(keyId)))) throw new ConfigError("key-id", `no active key "${keyId}"`);
  process.stdout.write(`revoked ${keyId}\n`);
});

withKeyService(keys.command("list").description("list keys (never their secrets)")).action(async (opts: Raw) => {
  for (const k of await withKeys(opts, (keys) => keys.list())) {
    const state = k.revokedAt ? "revoked" : k.expiresAt && k.expiresAt * 1000 < Date.now() ? "expired" : "active";
    process.stdout.write(`${k.keyId}\t${k.account}\t${k.tier}\t${k.rpm ?? "-"}\t${state}\n`);
  }
});

const models = program.command("models").description("whisper and GGUF files in --whisper-dir and --models-dir, pulled from the model hub (--hub-url)");

addOptions(
  models
    .command("pull")
    .description(
      `download models, checked against their sha256: whisper:<name>, speech:<name> (${SPEECH_MODELS.map((m) => m.name).join(", ")}), hf:<org>/<repo>/<file>.gguf, hf:<org>/<repo>:<quant>`,
    ),
  MODELS_OPTIONS,
  ["serve"],
)
  .argument("<refs...>")
  .action(async (refs: string[], opts: Raw) => {
    const { pullModels } = await import("./models.js");
    await pullModels(parseModelsConfig(opts), refs);
  });

addOptions(
  models.command("list").description("every installed file: kind, size, sha256, whether a whisper file is the catalog's, the ids it serves; partial downloads"),
  MODELS_OPTIONS,
)
  .option("--json", "print JSON")
  .action(async (opts: Raw) => {
    const { listModels } = await import("./models.js");
    await listModels(parseModelsConfig(opts), Boolean(opts.json));
  });

addOptions(models.command("rm").description("delete installed models (a reference or a file name), with any partial download"), MODELS_OPTIONS, ["serve", "hubUrl", "hfToken"])
  .argument("<targets...>")
  .action(async (targets: string[], opts: Raw) => {
    const { removeModels } = await import("./models.js");
    await removeModels(parseModelsConfig(opts), targets);
  });

program.parseAsync().catch((err: unknown) => {
  // Errors Kiln names (bad configuration, an engine that cannot load) are for the operator: their message.
  // Anything else is a bug: its stack.
  const known = err instanceof KilnError;
  process.stderr.write(`kiln: ${known ? err.message : String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});

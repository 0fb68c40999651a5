/**
 * The configuration file (`--config FILE` / `KILN_CONFIG`): a JSON object whose keys are the
 * options' names (`queueSize` or `queue-size`), merged under flags and `KILN_*` variables
 * (flag beats environment beats file beats default). Unknown keys and wrong types are errors
 * that name the file and the key.
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { optionKey, type OptionSpec } from "../config/index.js";
import { ConfigError } from "../core/errors.js";

type Raw = Record<string, string | string[] | undefined>;

const camel = (key: string) => key.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** `opts` with the file's values filled in wherever the user gave neither a flag nor a variable. */
export function withConfigFile(opts: Raw, command: Command, specs: Record<string, OptionSpec>): Raw {
  const path = typeof opts.config === "string" ? opts.config : undefined;
  if (!path) return opts;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new ConfigError(`--config / KILN_CONFIG`, `${path}: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new ConfigError("--config / KILN_CONFIG", `${path}: expected a JSON object of options`);
  const known = new Map(Object.values(specs).map((s) => [optionKey(s), s]));
  const out: Raw = { ...opts };
  for (const [rawKey, value] of Object.entries(parsed as Record<string, unknown>)) {
    const key = camel(rawKey);
    const spec = known.get(key);
    if (!spec) throw new ConfigError(`${path}: ${rawKey}`, `unknown option (known: ${[...known.keys()].join(", ")})`);
    const source = command.getOptionValueSource(key);
    if (source === "cli" || source === "env") continue;
    if (spec.repeatable) {
      if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) throw new ConfigError(`${path}: ${rawKey}`, "expected a list of strings");
      out[key] = value as string[];
    } else if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      out[key] = String(value);
    } else {
      throw new ConfigError(`${path}: ${rawKey}`, "expected a string, number or boolean");
    }
  }
  return out;
}

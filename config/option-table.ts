/**
 * The option-table machinery every command shares: what one declared option is, the key and name
 * commander and errors give it, and `parseWith`, which turns raw values (flag beats env beats
 * default, the CLI having merged them) into a typed, validated config or a `ConfigError` naming the
 * flag and its variable.
 */
import type { z } from "zod";
import { ConfigError } from "../core/errors.js";
import { withoutPassword } from "../core/net.js";

/** One declared option. `schema` receives the raw string (or list of strings when `repeatable`). */
export interface OptionSpec {
  /** Commander flag syntax, e.g. `--http <host:port>`. */
  flags: string;
  env: string;
  description: string;
  default?: string;
  repeatable?: boolean;
  /** Secret values are masked in `--print-config` and never logged. */
  secret?: boolean;
  schema: z.ZodType;
}

/** The camel-case key commander derives from a spec's long flag (`--queue-timeout` → `queueTimeout`). */
export function optionKey(spec: OptionSpec): string {
  const long = /--([a-z0-9-]+)/.exec(spec.flags)?.[1] ?? "";
  return long.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** Raw values: strings (flags, variables, a file), lists (repeatable flags), `true` (a flag without a value). */
export type Raw = Record<string, string | string[] | boolean | undefined>;
export type Parsed<T extends Record<string, OptionSpec>> = { [K in keyof T]: z.output<T[K]["schema"]> };

export function parseWith<T extends Record<string, OptionSpec>>(specs: T, raw: Raw, required: (keyof T)[] = []): Parsed<T> {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(specs)) {
    let value = raw[key] ?? spec.default;
    if (spec.repeatable) value = value === undefined ? [] : Array.isArray(value) ? value : String(value).split(",").filter(Boolean);
    const name = `${spec.flags.split(" ")[0]} / ${spec.env}`;
    if (value === undefined && required.includes(key)) throw new ConfigError(name, "is required");
    const result = spec.schema.safeParse(value);
    if (!result.success) throw new ConfigError(name, result.error.issues.map((i) => i.message).join("; "));
    out[key] = result.data;
  }
  return out as Parsed<T>;
}

/** `--flag / KILN_VAR` of a declared option, as a `ConfigError` names it. */
export const optionName = (spec: OptionSpec): string => `${spec.flags.split(" ")[0]} / ${spec.env}`;

/** The effective configuration with every secret masked (and any URL's password), for `--print-config` and start-up logs. */
export function maskSecrets(specs: Record<string, OptionSpec>, config: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, specs[k]?.secret && v !== undefined ? "[redacted]" : typeof v === "string" ? withoutPassword(v) : v]));
}

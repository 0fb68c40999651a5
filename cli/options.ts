/**
 * Builds commander options from the declarations in `config/` (flag beats env beats default).
 * A switch (a flag without a value, e.g. `--grpc-insecure`) is `true` when given; its variable's
 * text is passed on as is, for the config's boolean schema to read (`0` and `false` are off).
 */
import { Option, type Command } from "commander";
import type { OptionSpec } from "../config/index.js";

export function addOptions(command: Command, specs: Record<string, OptionSpec>, skip: string[] = []): Command {
  for (const [key, spec] of Object.entries(specs)) {
    if (skip.includes(key)) continue;
    const option = new Option(spec.flags, spec.description).env(spec.env);
    if (spec.default !== undefined && !spec.secret) option.default(spec.default);
    if (spec.repeatable) option.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), ...value.split(",").filter(Boolean)]);
    command.addOption(option);
    // Commander sets a switch to true whenever its variable exists, "0" and "false" included.
    if (option.isBoolean()) command.on(`optionEnv:${option.name()}`, () => command.setOptionValueWithSource(key, process.env[spec.env], "env"));
  }
  return command;
}

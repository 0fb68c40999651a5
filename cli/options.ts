/** Builds commander options from the declarations in `config/` (flag beats env beats default). */
import { Option, type Command } from "commander";
import type { OptionSpec } from "../config/index.js";

export function addOptions(command: Command, specs: Record<string, OptionSpec>, skip: string[] = []): Command {
  for (const [key, spec] of Object.entries(specs)) {
    if (skip.includes(key)) continue;
    const option = new Option(spec.flags, spec.description).env(spec.env);
    if (spec.default !== undefined && !spec.secret) option.default(spec.default);
    if (spec.repeatable) option.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), ...value.split(",").filter(Boolean)]);
    command.addOption(option);
  }
  return command;
}

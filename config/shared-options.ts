/** Options more than one command declares alike: `--log-level`, and `--drain-seconds` with its own wording. */
import { z } from "zod";
import { LOG_LEVELS } from "../core/log.js";
import type { OptionSpec } from "./option-table.js";
import { int } from "./values.js";

export const logLevel = {
  flags: "--log-level <level>",
  env: "KILN_LOG_LEVEL",
  default: "info",
  description: `log level (${LOG_LEVELS.join(", ")})`,
  schema: z.enum(LOG_LEVELS),
} satisfies OptionSpec;

/** `--drain-seconds`: how long SIGTERM waits for work in flight before exiting. */
export const drainSeconds = (what: string) =>
  ({
    flags: "--drain-seconds <s>",
    env: "KILN_DRAIN_SECONDS",
    default: "30",
    description: `on SIGTERM, seconds ${what} before exit`,
    schema: int(0, 3600),
  }) satisfies OptionSpec;

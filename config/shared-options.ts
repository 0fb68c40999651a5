/** Options more than one command declares alike: `--log-level`, and `--drain-seconds` with its own wording. */
import { z } from "zod";
import { LOG_LEVELS } from "../core/log.js";
import type { OptionSpec } from "./option-table.js";
import { hubUrl as hubUrlValue, int } from "./values.js";

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

/**
 * The model hub, in Hugging Face's layout ({hub}/{repo}/resolve/{revision}/{file}): where agents pull
 * whisper and GGUF files, and where the scheduler reads a catalog model's GGUF header to size it.
 * Default: https://huggingface.co.
 */
export const hubUrl = {
  flags: "--hub-url <url>",
  env: "KILN_HUB_URL",
  default: "https://huggingface.co",
  description:
    "model hub in Hugging Face's layout ({hub}/{repo}/resolve/{revision}/{file}), Hugging Face or a mirror: agents pull whisper and GGUF files from it, the scheduler reads catalog models' GGUF headers there",
  schema: hubUrlValue,
} satisfies OptionSpec;

/** Token for gated repositories, sent to the hub only and never logged. Default: none. */
export const hfToken = {
  flags: "--hf-token <token>",
  env: "HF_TOKEN",
  secret: true,
  description: "token sent to the hub for gated repositories (never logged; default: none)",
  schema: z.string().min(1).optional(),
} satisfies OptionSpec;

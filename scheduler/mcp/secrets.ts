/**
 * Secrets of MCP configurations are only ever named (`*_env`); this reads them from the
 * scheduler's environment when an integration connects. A variable that is not set is a
 * misconfiguration (the tester answers 502 `mcp_misconfigured`), not an unreachable server.
 */
export class MissingSecretError extends Error {
  constructor(readonly variable: string) {
    super(`environment variable ${variable} is not set on the scheduler`);
    this.name = "MissingSecretError";
  }
}

/** The value of the variable `name` names; throws `MissingSecretError` when unset or empty. */
export function secretFromEnv(name: string | undefined): string {
  const value = name ? process.env[name] : undefined;
  if (!value) throw new MissingSecretError(name ?? "(none named)");
  return value;
}

/** Like `secretFromEnv`, but no variable named means no secret (e.g. an optional password). */
export function optionalSecretFromEnv(name: string | undefined): string | undefined {
  return name ? secretFromEnv(name) : undefined;
}

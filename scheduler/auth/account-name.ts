/**
 * Account names: 1–64 of letters, digits, `_`, `.`, `@`, `-`, not starting with `.`. An account
 * name is also a folder name (each account's filesystem roots live under `--mcp-fs-base/<account>`),
 * so it is one plain path segment, never "." or "..".
 */
const ACCOUNT_NAME = /^[A-Za-z0-9_@-][A-Za-z0-9_.@-]{0,63}$/;

export function isValidAccountName(account: unknown): account is string {
  return typeof account === "string" && ACCOUNT_NAME.test(account); // no leading ".": never "." or ".."
}

/** What an invalid account name is told. */
export const ACCOUNT_NAME_RULE = "1–64 letters, digits, _ . @ or -, not starting with .";

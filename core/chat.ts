/** The roles of a chat message (README, "API"), shared by the scheduler's validation and the agent's engine. */
export const CHAT_ROLES = ["system", "user", "assistant"] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

export function isChatRole(value: string): value is ChatRole {
  return (CHAT_ROLES as readonly string[]).includes(value);
}

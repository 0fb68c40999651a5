/**
 * How a served model speculates (speculative decoding, agent/llm/speculative.ts), as the agent's
 * `--speculative`, the operator's catalog and the fleet link's LoadModel write it: `lookup` or
 * `draft:SOURCE`. Here, apart from the engine, because every command parses configuration.
 */

/** How a served model speculates: prompt lookup, or a draft model's GGUF (a path on the node, or an `hf:` reference). */
export type Speculation = { kind: "lookup" } | { kind: "draft"; source: string };

/** The longest `--speculative` / catalog `speculative` value accepted (a draft's source included). */
export const MAX_SPECULATION_CHARS = 1024;

/**
 * Parses `lookup` or `draft:SOURCE` (SOURCE a GGUF path, or `hf:org/repo/file.gguf`). Returns the
 * speculation, or a message saying what is wrong (for the caller's error, which names the field).
 */
export function parseSpeculation(text: string): Speculation | string {
  if (text.length > MAX_SPECULATION_CHARS) return `longer than ${MAX_SPECULATION_CHARS} characters`;
  if (text === "lookup") return { kind: "lookup" };
  if (text.startsWith("draft:") && text.length > "draft:".length) return { kind: "draft", source: text.slice("draft:".length) };
  return `expected "lookup" or "draft:GGUF" (a path or an hf: reference), got ${JSON.stringify(text.slice(0, 64))}`;
}

/** The text form `parseSpeculation` reads. */
export function speculationText(s: Speculation): string {
  return s.kind === "lookup" ? "lookup" : `draft:${s.source}`;
}

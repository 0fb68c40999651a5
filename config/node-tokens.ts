/**
 * `--node-tokens` entries (a token, the node ids it may register, the models and slots those nodes
 * may offer), the node-id rule, and the `*` glob matcher they are checked with.
 */
import { z } from "zod";
import { list } from "./values.js";

/** One `--node-tokens` entry: a token, the node ids it may register, and what those nodes may offer. */
export interface NodeTokenEntry {
  token: string;
  /** Node ids or `*` globs this token may register; absent: any node id. */
  nodeIds?: string[];
  /** Model ids (chat and whisper) or `*` globs its nodes may offer; absent: any model. */
  models?: string[];
  /** Most slots one of its nodes may register (its pools together; its transcription slots apart); absent: `--max-node-slots`. */
  slots?: number;
}

/** What a node id may be: 1–128 letters, digits, `.`, `_` or `-` (a host name fits). Checked at Register. */
export const NODE_ID_RULE = "1 to 128 letters, digits, '.', '_' or '-'";
export const NODE_ID = /^[A-Za-z0-9._-]{1,128}$/;
export const isValidNodeId = (id: string): boolean => NODE_ID.test(id);

/** The part of an entry before its token: IDS, then optional `;models:M1|M2` and `;slots:N`. */
const ENTRY_PREFIX = /^[A-Za-z0-9._*|-]+(;(models:[^;=,\s]+|slots:\d+))*$/;

/**
 * `TOKEN` (any node id, any model, `--max-node-slots`) or `IDS[;models:MODELS][;slots:N]=TOKEN`:
 * IDS are node ids or `*` globs joined by `|`, MODELS model ids or `*` globs joined by `|` (a model
 * id there holds no `;`, `|`, `,`, `=` or whitespace), N the most slots one of those nodes may
 * register. An entry has a prefix only when what precedes its first `=` looks like one and the rest
 * is at least 16 characters, so a bare token with `=` in it (base64 padding) stays a bare token.
 */
export function parseNodeTokenEntry(entry: string): NodeTokenEntry {
  const eq = entry.indexOf("=");
  const prefix = entry.slice(0, eq);
  if (eq > 0 && ENTRY_PREFIX.test(prefix) && entry.length - eq - 1 >= 16) {
    const [ids, ...fields] = prefix.split(";");
    const parsed: NodeTokenEntry = { token: entry.slice(eq + 1), nodeIds: ids!.split("|").filter(Boolean) };
    for (const field of fields) {
      const value = field.slice(field.indexOf(":") + 1);
      if (field.startsWith("models:")) parsed.models = [...(parsed.models ?? []), ...value.split("|").filter(Boolean)];
      else parsed.slots = Number(value);
    }
    return parsed;
  }
  return { token: entry };
}

/**
 * Whether `text` matches `glob` (`*`: any run of characters, everything else literal), in time linear
 * in the text for each literal piece: the first piece is a prefix, the last a suffix, and each piece
 * between is found at its leftmost place after the one before (leftmost is always right for `*`-only
 * globs: a later place leaves less room to the pieces after it). No regular expression, so no backtracking.
 */
export function globMatches(glob: string, text: string): boolean {
  const pieces = glob.split("*");
  if (pieces.length === 1) return glob === text;
  const first = pieces[0]!;
  const last = pieces[pieces.length - 1]!;
  if (text.length < first.length + last.length || !text.startsWith(first) || !text.endsWith(last)) return false;
  let at = first.length;
  const end = text.length - last.length;
  for (let i = 1; i < pieces.length - 1; i++) {
    const piece = pieces[i]!;
    if (!piece) continue;
    const found = text.indexOf(piece, at);
    if (found < 0 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return true;
}

/** A test of names against an entry's names and globs (`*`: any run of characters); no names: any name. */
export function nodeIdMatcher(nodeIds: string[] | undefined): (nodeId: string) => boolean {
  if (!nodeIds) return () => true;
  return (nodeId) => nodeIds.some((glob) => globMatches(glob, nodeId));
}

export const nodeTokens = list.pipe(z.array(z.string()).min(1, "at least one token is required")).transform((entries, ctx) =>
  entries.map((entry, i) => {
    const parsed = parseNodeTokenEntry(entry);
    // Messages name the entry by position: a token never goes into an error or a log.
    if (parsed.token.length < 16) ctx.addIssue({ code: "custom", message: "each token must be at least 16 characters" });
    if (/\s/.test(parsed.token)) ctx.addIssue({ code: "custom", message: `entry ${i + 1}: a token cannot hold whitespace (it travels as "Bearer <token>")` });
    if (parsed.nodeIds?.length === 0) ctx.addIssue({ code: "custom", message: `entry ${i + 1}: IDS=TOKEN needs at least one node id before "="` });
    // a prefix mistyped (a "," between models splits the entry) must not become a token any node id may use
    if (!parsed.nodeIds && /;|models:|slots:/.test(entry))
      ctx.addIssue({
        code: "custom",
        message: `entry ${i + 1}: holds ";", "models:" or "slots:" but is not IDS[;models:M1|M2][;slots:N]=TOKEN (models are joined by "|", not ","; the token at least 16 characters)`,
      });
    if (parsed.slots !== undefined && !(parsed.slots >= 1 && parsed.slots <= 65_536))
      ctx.addIssue({ code: "custom", message: `entry ${i + 1}: slots must be a whole number from 1 to 65536` });
    return parsed;
  }),
);

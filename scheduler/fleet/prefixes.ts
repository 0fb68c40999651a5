/**
 * Where a conversation's KV cache lives. An agent keeps each slot's KV cache between requests and
 * gives a request the free slot holding the longest prefix of its prompt (agent/llm/pool.ts), so a
 * conversation's next turn evaluates only its new tokens when it lands where its last turn ran.
 * The scheduler keeps, per pool, a compact record of what its slots hold: for each slot, the chain
 * of hashes of the conversation's message prefixes, and routes a request to the pool holding its
 * longest prefix (the fleet weighs that against load: fleet.ts `dispatch`).
 *
 * A chain starts from the cache scope (an opaque HMAC of the account: no two accounts share a
 * prefix, as no two share a slot's cache on the agent) and the tools offered (they are rendered
 * into the prompt); each link hashes one more message. The record mirrors the agent's slot policy:
 * a request takes over the slot entry sharing its longest prefix, else the least recently used one,
 * and once answered the entry grows by the reply, which the client sends back as the next turn's
 * assistant message. It is a hint: a wrong guess costs a prompt evaluation, never a wrong answer.
 */
import { createHash, type Hash } from "node:crypto";
import { SLOT_PROMPT_SIMILARITY, type ChatMessage, type ToolCall, type ToolFunction } from "../../core/chat.js";

/** Bytes of a link kept (base64url of the first 12 bytes of a SHA-256). */
const LINK_CHARS = 16;
/** Messages beyond this many are not hashed: a longer conversation is matched on its first ones (a pool's record stays within slots × this many links). */
export const MAX_PREFIX_MESSAGES = 256;

const digest = (h: Hash): string => h.digest("base64url").slice(0, LINK_CHARS);

/**
 * One message as a chain link hashes it, fed piece by piece: the same bytes whether the message
 * comes whole in a request or streamed as a reply (text, then each call's name and arguments).
 */
export class MessageHash {
  private readonly hash: Hash;
  constructor(previous: string, role: string) {
    this.hash = createHash("sha256").update(previous).update("\0").update(role).update("\0");
  }
  text(piece: string): this {
    this.hash.update(piece);
    return this;
  }
  call(name: string): this {
    this.hash.update("\0call\0").update(name).update("\0");
    return this;
  }
  /** The link (the hash object is spent). */
  end(): string {
    return digest(this.hash);
  }
}

const callsOf = (h: MessageHash, calls: readonly ToolCall[] | undefined): MessageHash => {
  for (const c of calls ?? []) h.call(c.name).text(c.arguments);
  return h;
};

/** The bytes of text in each of a conversation's prefixes (element i: messages 0 to i), for as many messages as its chain has. */
export function prefixBytes(messages: readonly ChatMessage[]): number[] {
  let total = 0;
  return messages.slice(0, MAX_PREFIX_MESSAGES).map((m) => (total += Buffer.byteLength(m.content) + (m.toolCalls ?? []).reduce((n, c) => n + Buffer.byteLength(c.arguments), 0)));
}

/** The chain of a conversation's prefixes: element i ends with message i. */
export function prefixChain(scope: string, tools: readonly ToolFunction[] | undefined, messages: readonly ChatMessage[]): string[] {
  let link = digest(
    createHash("sha256")
      .update("kiln-prefix\0")
      .update(scope)
      .update("\0")
      .update(tools?.length ? JSON.stringify(tools) : ""),
  );
  const chain: string[] = [];
  for (const m of messages.slice(0, MAX_PREFIX_MESSAGES)) {
    const h = new MessageHash(link, m.role).text(m.content);
    if (m.toolCallId !== undefined) h.call(`#${m.toolCallId}`);
    link = callsOf(h, m.toolCalls).end();
    chain.push(link);
  }
  return chain;
}

interface Entry {
  chain: string[];
  used: number;
}

/** One pool's slots as the record sees them. */
interface Ring<P> {
  pool: P;
  slots: number;
  entries: Entry[];
}

/** Prefix records for every pool `P` (the fleet's pool objects), with an index from link to the pools holding it. */
export class PrefixRecords<P extends object> {
  private readonly rings = new Map<P, Ring<P>>();
  /** link → the pools holding it, with how many of their entries do. */
  private readonly index = new Map<string, Map<P, number>>();
  private tick = 0;

  /**
   * The pools holding the longest prefix of `chain` that `eligible` accepts, and its length in
   * messages; undefined when none holds any of it.
   */
  longest(chain: readonly string[], eligible: (pool: P) => boolean): { pools: P[]; length: number } | undefined {
    for (let i = chain.length - 1; i >= 0; i--) {
      const holders = this.index.get(chain[i]!);
      if (!holders) continue;
      const pools = [...holders.keys()].filter(eligible);
      if (pools.length > 0) return { pools, length: i + 1 };
    }
    return undefined;
  }

  /**
   * A request with `chain` went to `pool` of `slots` slots. As the agent gives slots: it takes the
   * entry sharing its longest prefix when that is at least SLOT_PROMPT_SIMILARITY of the entry (or no entry
   * is free), else a free entry, else the least recently used one.
   */
  record(pool: P, slots: number, chain: readonly string[]): void {
    if (chain.length === 0) return;
    let ring = this.rings.get(pool);
    if (!ring) this.rings.set(pool, (ring = { pool, slots, entries: [] }));
    ring.slots = slots;
    const room = Math.max(1, ring.slots);
    let best: Entry | undefined;
    let shared = 0;
    for (const e of ring.entries) {
      const n = sharedLength(e.chain, chain);
      if (n > shared) [best, shared] = [e, n];
    }
    // a conversation sharing only a system prompt with another does not take its entry while there is room
    if (best && shared < best.chain.length * SLOT_PROMPT_SIMILARITY && ring.entries.length < room) best = undefined;
    if (!best && ring.entries.length < room) ring.entries.push((best = { chain: [], used: 0 }));
    best ??= leastRecent(ring.entries);
    this.replace(pool, best, chain);
    best.used = ++this.tick;
    while (ring.entries.length > room) this.forget(pool, ring.entries.splice(ring.entries.indexOf(leastRecent(ring.entries)), 1)[0]!);
  }

  /** The reply to a request with `chain` on `pool` ended with `link`: the entry holding `chain` grows by it. */
  extend(pool: P, chain: readonly string[], link: string): void {
    const ring = this.rings.get(pool);
    const last = chain[chain.length - 1];
    const entry = ring?.entries.find((e) => e.chain.length === chain.length && e.chain[e.chain.length - 1] === last);
    if (!entry || entry.chain.length >= MAX_PREFIX_MESSAGES) return;
    entry.chain.push(link);
    this.hold(pool, link);
  }

  /** The pool is gone (its node left, or it was unloaded). */
  drop(pool: P): void {
    const ring = this.rings.get(pool);
    if (!ring) return;
    for (const e of ring.entries) this.forget(pool, e);
    this.rings.delete(pool);
  }

  /** Links held, all pools together (observability, tests). */
  get size(): number {
    return this.index.size;
  }

  private replace(pool: P, entry: Entry, chain: readonly string[]): void {
    const keep = sharedLength(entry.chain, chain);
    for (const link of entry.chain.slice(keep)) this.release(pool, link);
    for (const link of chain.slice(keep)) this.hold(pool, link);
    entry.chain = [...chain];
  }

  private forget(pool: P, entry: Entry): void {
    for (const link of entry.chain) this.release(pool, link);
    entry.chain = [];
  }

  private hold(pool: P, link: string): void {
    let holders = this.index.get(link);
    if (!holders) this.index.set(link, (holders = new Map()));
    holders.set(pool, (holders.get(pool) ?? 0) + 1);
  }

  private release(pool: P, link: string): void {
    const holders = this.index.get(link);
    const n = holders?.get(pool);
    if (!holders || n === undefined) return;
    if (n > 1) holders.set(pool, n - 1);
    else {
      holders.delete(pool);
      if (holders.size === 0) this.index.delete(link);
    }
  }
}

function sharedLength(a: readonly string[], b: readonly string[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

function leastRecent(entries: Entry[]): Entry {
  return entries.reduce((a, b) => (b.used < a.used ? b : a));
}

/**
 * Gathers the generated text of every completion running on one link into few wire messages.
 *
 * A completion's first piece goes out at once: time to first token is what a user feels. A later
 * piece goes out at once too when the link's last flush is `intervalMs` old (a slow model's tokens
 * are not held back); otherwise it waits for the next flush, at most `intervalMs` away, and one
 * flush sends what every completion has gathered, in one message. A small model generates
 * thousands of tokens a second, and a message per token then costs the agent, the scheduler and
 * the client more CPU than the generation itself. With many streams, one timer and one message
 * per flush (instead of one of each per stream) also leave the event loop free for the generation
 * loop between tokens.
 */

import type { ToolCallDelta } from "../../core/chat.js";

/** One generated token's log probability and alternatives, as the wire carries it. */
export interface WireLogprob {
  token: string;
  logprob: number;
  /** Raw bytes when the text is not them (U+FFFD). */
  raw?: Uint8Array;
  top_logprobs: { token: string; logprob: number; raw?: Uint8Array }[];
  /** Where the token's text starts in its choice's text. */
  text_offset: number;
}

/** Text that became final for one completion since its last piece, and its tokens' log probabilities when asked for. */
export interface Piece {
  request_id: string;
  text: string;
  logprobs?: WireLogprob[];
  /** The choice it belongs to, when the request has several (absent: the first). */
  index?: number;
  /** Pieces of function calls generated after the text. */
  tool_calls?: { index: number; name?: string; arguments: string }[];
}

export class ChunkBatcher {
  /** Request id (and choice index) → what it gathered since the last flush (insertion order: first come, first sent). */
  private readonly pending = new Map<string, Piece>();
  /** Requests whose first piece went out. */
  private readonly started = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private lastFlush = -Infinity;

  /**
   * @param send receives each flush: one piece per completion, in order.
   * @param intervalMs the longest a piece waits; 0 sends every piece as it comes.
   */
  constructor(
    private readonly send: (pieces: Piece[]) => void,
    private readonly intervalMs: number,
  ) {}

  push(requestId: string, text: string, logprobs?: WireLogprob[], index = 0): void {
    if (!text) return;
    this.add(
      requestId,
      index,
      () => ({ request_id: requestId, text, ...(logprobs ? { logprobs: [...logprobs] } : {}), ...(index > 0 ? { index } : {}) }),
      (gathered) => {
        if (gathered.tool_calls) return false; // text after calls: sent after them, not merged before them
        gathered.text += text;
        if (logprobs) (gathered.logprobs ??= []).push(...logprobs);
        return true;
      },
    );
  }

  /** A piece of a function call of the completion's (first) choice, sent after the text gathered before it. */
  pushToolCall(requestId: string, delta: ToolCallDelta): void {
    const wire = { index: delta.index, ...(delta.name !== undefined ? { name: delta.name } : {}), arguments: delta.arguments };
    this.add(
      requestId,
      0,
      () => ({ request_id: requestId, text: "", tool_calls: [wire] }),
      (gathered) => {
        const calls = (gathered.tool_calls ??= []);
        const last = calls.at(-1);
        if (last && last.index === wire.index && wire.name === undefined) last.arguments += wire.arguments;
        else calls.push(wire);
        return true;
      },
    );
  }

  /**
   * Sends `make()` at once when it is the completion's first piece or the link flushes every piece;
   * else merges it into the piece the completion (choice) gathers (`merge` false: that one is sent first).
   */
  private add(requestId: string, index: number, make: () => Piece, merge: (gathered: Piece) => boolean): void {
    if (this.intervalMs <= 0 || !this.started.has(requestId)) {
      this.started.add(requestId);
      this.send([make()]);
      return;
    }
    const key = index > 0 ? `${requestId}#${index}` : requestId;
    const gathered = this.pending.get(key);
    if (!gathered) this.pending.set(key, make());
    else if (!merge(gathered)) {
      this.pending.delete(key);
      this.send([gathered]);
      this.pending.set(key, make());
    }
    if (this.timer) return;
    const wait = this.lastFlush + this.intervalMs - performance.now();
    if (wait <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Sends what the completion has pending now, every choice's (before its final message), and forgets it. */
  end(requestId: string): void {
    const pieces = [...this.pending.values()].filter((p) => p.request_id === requestId);
    this.forget(requestId);
    if (pieces.length > 0) this.send(pieces);
  }

  /**
   * Drops what the completion has pending (it failed or was cancelled) and forgets it.
   * @returns whether any of its text went out.
   */
  discard(requestId: string): boolean {
    const sent = this.started.has(requestId);
    this.forget(requestId);
    return sent;
  }

  /** Drops everything (the link is gone). */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
    this.started.clear();
  }

  private flush(): void {
    this.timer = undefined;
    if (this.pending.size === 0) return;
    this.lastFlush = performance.now();
    const pieces = [...this.pending.values()];
    this.pending.clear();
    this.send(pieces);
  }

  private forget(requestId: string): void {
    for (const [key, piece] of this.pending) if (piece.request_id === requestId) this.pending.delete(key);
    this.started.delete(requestId);
    if (this.pending.size === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}

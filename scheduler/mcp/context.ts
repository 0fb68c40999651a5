/**
 * What an integration is given to connect with: the egress guard, the account's secrets, the time
 * it has, a signal that fires when the caller gives up, and `defer`, where it registers how to
 * close what it opens. Integrations register a closer right after creating a client and before
 * awaiting anything on it, so a test that times out (or fails) half way closes every socket.
 */
import type { EgressPolicy } from "./egress.js";
import type { SecretReader } from "./secrets.js";

export interface ConnectContext {
  /** The guard every outbound connection goes through. */
  egress: EgressPolicy;
  /** The account's secrets, by name. */
  secret: SecretReader;
  /** How long the integration may take, in ms; sockets and queries time out below it. */
  timeoutMs: number;
  /** Aborted when the caller gives up (timeout, client gone). */
  signal: AbortSignal;
  /** Registers a closer, run once when the caller is done, however it ends. */
  defer(close: () => unknown): void;
}

/** A problem with the configuration that Kiln itself found: its message is safe to show the tenant. */
export class McpConfigProblem extends Error {
  constructor(message: string) {
    super(message);
    this.name = "McpConfigProblem";
  }
}

/** A context and its `close()`, which aborts the signal and runs every closer (errors swallowed), newest first. */
export function connectScope(options: Omit<ConnectContext, "signal" | "defer">): { context: ConnectContext; close: () => Promise<void> } {
  const controller = new AbortController();
  const closers: (() => unknown)[] = [];
  let closed = false;
  const context: ConnectContext = {
    ...options,
    signal: controller.signal,
    defer: (close) => {
      if (closed)
        void Promise.resolve()
          .then(close)
          .catch(() => undefined); // registered after the end: close at once
      else closers.push(close);
    },
  };
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    controller.abort();
    for (const c of closers.reverse())
      await Promise.resolve()
        .then(c)
        .catch(() => undefined);
  };
  return { context, close };
}

/** `fetch` through the egress guard, its connections closed with the scope, each call bounded by the timeout and the scope's signal. */
export function scopedFetch(ctx: ConnectContext): typeof globalThis.fetch {
  const { fetch, close } = ctx.egress.fetch(ctx.timeoutMs);
  ctx.defer(close);
  return (input, init = {}) => fetch(input, { ...init, signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(ctx.timeoutMs), ...(init.signal ? [init.signal] : [])]) });
}

/** The first `maxBytes` of a response's body as text (the rest is not read), and whether it was cut. */
export async function readCapped(res: Response, maxBytes: number): Promise<{ text: string; truncated: boolean }> {
  const reader = res.body?.getReader();
  if (!reader) return { text: "", truncated: false };
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { text: Buffer.concat(parts).toString("utf8"), truncated: false };
    parts.push(value);
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return { text: Buffer.concat(parts).subarray(0, maxBytes).toString("utf8"), truncated: true };
    }
  }
}

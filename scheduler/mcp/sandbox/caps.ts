/**
 * The limits a sandbox process holds itself to, on top of the V8 heap cap it is started with and
 * the wall clock the scheduler keeps: the bytes it reads from every socket together, and its
 * resident memory (buffers a parser holds live outside the heap). A breach calls `stop` once.
 */
import { Socket } from "node:net";
import { Readable } from "node:stream";
import type { SandboxLimits } from "./protocol.js";

export type Breach = { kind: "read"; limit: number } | { kind: "memory"; limit: number };

/** How often resident memory is read, in ms. */
const MEMORY_POLL_MS = 20;

/**
 * Counts every chunk any socket of this process takes in (plain and TLS alike: both reach the
 * stream through `push`) and polls the resident memory; calls `stop` at the first breach. Only for
 * a process of its own: it changes `net.Socket` for everything in it.
 */
export function holdTo(limits: SandboxLimits, stop: (breach: Breach) => void): void {
  let read = 0;
  let stopped = false;
  const breach = (b: Breach): void => {
    if (stopped) return;
    stopped = true;
    stop(b);
  };
  const push = Readable.prototype.push;
  Socket.prototype.push = function (this: Socket, chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk !== null && chunk !== undefined) {
      read += typeof chunk === "string" ? Buffer.byteLength(chunk) : (chunk as Uint8Array).byteLength;
      if (read > limits.readBytes) {
        breach({ kind: "read", limit: limits.readBytes });
        this.destroy();
        return false;
      }
    }
    return push.call(this, chunk, encoding);
  };
  setInterval(() => {
    if (process.memoryUsage.rss() > limits.memoryBytes) breach({ kind: "memory", limit: limits.memoryBytes });
  }, MEMORY_POLL_MS).unref();
}

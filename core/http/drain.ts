import type { IncomingMessage } from "node:http";

/** Longest a refusal waits for the rest of the body before it is answered (see `drain`). */
const DRAIN_WAIT_MS = 2000;
/** Most bytes of a refused request's body read and dropped (see `drain`). */
const DRAIN_BYTES = 64 * 1024 ** 2;

/**
 * Reads and drops the rest of a refused request's body (clients such as fetch read the answer
 * only once they have sent everything), up to `DRAIN_BYTES`; past that the connection is cut.
 * Resolves when the body has ended, the connection is gone, or after `DRAIN_WAIT_MS` (reading
 * goes on behind): a refusal answered then reaches a client that has usually stopped writing.
 */
export function drain(req: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    if (req.readableEnded || req.destroyed) return resolve();
    let dropped = 0;
    const timer = setTimeout(resolve, DRAIN_WAIT_MS);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    req.on("data", (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > DRAIN_BYTES) req.socket.destroy();
    });
    req.once("end", done);
    req.once("close", done);
    req.resume();
  });
}

import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { serve, type HttpBindings } from "@hono/node-server";
import type { HostPort } from "../net.js";

export interface HttpListener {
  /** The bound address (the real port when 0 was asked). */
  address: HostPort;
  server: Server;
  /**
   * Stops listening; requests in flight get `graceMs` (default 0) to finish before the remaining
   * connections are dropped. Idle keep-alive connections close at once.
   */
  close(graceMs?: number): Promise<void>;
}

export interface ListenOptions {
  /**
   * Longest a request may take to arrive whole, in ms (Node's `server.requestTimeout`). Default:
   * Node's 300 s; an upload server raises it to fit its largest upload at a slow client's speed.
   */
  requestTimeoutMs?: number;
  /**
   * A connection with no traffic either way for this long is closed (Node's `server.timeout`), unless
   * the wait is the server's: a whole request is in and its answer is being made with nothing left
   * unsent (a completion queued or generating, a quiet stretch of a stream). So a connection that
   * sends nothing, stalls in its headers or body, or idles between requests is closed, and so is one
   * whose client stops reading an answer; a slow but moving upload or a long answer is not. Also
   * bounds the headers' arrival (`headersTimeout`) and a keep-alive wait (`keepAliveTimeout`, at most
   * Node's 5 s). Default: none.
   */
  idleTimeoutMs?: number;
}

/** The slowest upload the request timeout allows for: 1 MB/s, plus a margin for the rest of the request. */
const SLOWEST_UPLOAD_BYTES_PER_S = 1024 ** 2;
const REQUEST_MARGIN_S = 300;

/** A request timeout (ms) that lets an upload of `maxBytes` arrive at a slow client's 1 MB/s. */
export function uploadTimeoutMs(maxBytes: number): number {
  return (Math.ceil(maxBytes / SLOWEST_UPLOAD_BYTES_PER_S) + REQUEST_MARGIN_S) * 1000;
}

/** Serves a Hono `fetch` on host:port (port 0 picks a free one). */
export async function listenHttp(fetch: (req: Request, env: HttpBindings) => Response | Promise<Response>, at: HostPort, options: ListenOptions = {}): Promise<HttpListener> {
  let server: Server | undefined; // serve() makes an HTTP/1 server unless told otherwise
  const port = await new Promise<number>((resolve, reject) => {
    server = serve(
      {
        fetch: fetch as Parameters<typeof serve>[0]["fetch"],
        hostname: at.host,
        port: at.port,
        ...(options.requestTimeoutMs !== undefined ? { serverOptions: { requestTimeout: options.requestTimeoutMs } } : {}),
      },
      (info: AddressInfo) => resolve(info.port),
    ) as Server;
    server.once("error", reject);
  });
  const s = server!;
  if (options.idleTimeoutMs !== undefined) idleTimeout(s, options.idleTimeoutMs);
  return {
    address: { host: at.host, port },
    server: s,
    close: (graceMs = 0) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => s.closeAllConnections(), graceMs);
        s.close(() => {
          clearTimeout(timer);
          resolve();
        });
        s.closeIdleConnections();
        if (graceMs === 0) s.closeAllConnections();
      }),
  };
}

/** Closes connections idle for `ms` on the client's side (see `ListenOptions.idleTimeoutMs`). */
function idleTimeout(server: Server, ms: number): void {
  /** Each connection's request being answered. */
  const answering = new WeakMap<Socket, { req: IncomingMessage; res: ServerResponse }>();
  server.on("request", (req: IncomingMessage, res: ServerResponse) => answering.set(req.socket, { req, res }));
  server.setTimeout(ms, (socket: Socket) => {
    const current = answering.get(socket);
    // the whole request is in, the answer is not done and nothing of it waits to be sent: the server is the one working
    if (current && current.req.complete && !current.res.writableEnded && socket.writableLength === 0 && !socket.destroyed) {
      socket.setTimeout(ms); // looked at again after another idle stretch
      return;
    }
    socket.destroy();
  });
  server.headersTimeout = Math.min(ms, server.requestTimeout > 0 ? server.requestTimeout : ms);
  server.keepAliveTimeout = Math.min(server.keepAliveTimeout, ms);
}

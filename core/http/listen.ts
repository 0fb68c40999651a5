import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve, type HttpBindings } from "@hono/node-server";
import type { HostPort } from "../../config/index.js";

export interface HttpListener {
  /** The bound address (the real port when 0 was asked). */
  address: HostPort;
  server: Server;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

/** Serves a Hono `fetch` on host:port (port 0 picks a free one). */
export async function listenHttp(fetch: (req: Request, env: HttpBindings) => Response | Promise<Response>, at: HostPort): Promise<HttpListener> {
  let server: Server | undefined; // serve() makes an HTTP/1 server unless told otherwise
  const port = await new Promise<number>((resolve, reject) => {
    server = serve({ fetch: fetch as Parameters<typeof serve>[0]["fetch"], hostname: at.host, port: at.port }, (info: AddressInfo) => resolve(info.port)) as Server;
    server.once("error", reject);
  });
  const s = server!;
  return {
    address: { host: at.host, port },
    server: s,
    close: () => new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    }),
  };
}

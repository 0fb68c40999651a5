/**
 * A bare `node:http` server, the floor `npm run bench:gateway -- --bare` measures the scheduler
 * against: it answers each request with a status and body recorded from the scheduler, byte for
 * byte, doing nothing else (no routing beyond method, path and whether `Authorization` is sent; no
 * key check; no headers but the content type and length). A request's body is read to its end
 * before the answer, as the scheduler reads it.
 *
 * Run as a child process (as the scheduler is): `node bare-http.js`, its answers as JSON on stdin
 * (`BareAnswer[]`); it prints `{"port":N}` once it listens on 127.0.0.1.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** One recorded answer: for `method path`, with or without an `Authorization` header. */
export interface BareAnswer {
  method: string;
  path: string;
  authorized: boolean;
  status: number;
  contentType: string;
  body: string;
}

/** Serves `answers` on a free port of 127.0.0.1; resolves the port and a close. */
export function serveBare(answers: readonly BareAnswer[]): Promise<{ port: number; close: () => void }> {
  const table = new Map(answers.map((a) => [`${a.method} ${a.path} ${a.authorized}`, { ...a, bytes: Buffer.from(a.body) }]));
  const server = createServer((req, res) => {
    const answer = () => {
      const a = table.get(`${req.method} ${req.url} ${req.headers.authorization !== undefined}`);
      if (!a) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(a.status, { "content-type": a.contentType, "content-length": a.bytes.length }).end(a.bytes);
    };
    if (req.method === "GET" || req.method === "HEAD") answer();
    else req.on("data", () => undefined).on("end", answer);
  });
  const close = () => {
    server.close();
    server.closeAllConnections();
  };
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ port: (server.address() as AddressInfo).port, close })));
}

async function main(): Promise<void> {
  let input = "";
  for await (const chunk of process.stdin) input += String(chunk);
  const { port } = await serveBare(JSON.parse(input) as BareAnswer[]);
  process.stdout.write(`${JSON.stringify({ port })}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) void main();

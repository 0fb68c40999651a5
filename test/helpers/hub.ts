/**
 * A model hub on loopback for the tests, in Hugging Face's layout: `{org}/{repo}/resolve/{revision}/{file}`
 * (HEAD and GET, with Range, `x-linked-etag` and `x-linked-size`), and the llama.cpp manifest
 * `v2/{org}/{repo}/manifests/{quant}`. Each file can misbehave on purpose: cut the first
 * connection off, announce another size or sha256, trickle its bytes, ask for a token.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface HubFile {
  body: Buffer;
  /** The sha256 announced in x-linked-etag (default: the body's); null sends none. */
  sha256?: string | null;
  /** The size announced on HEAD (default: the body's). */
  announcedSize?: number;
  /** The first ranged GET (a download, not a probe) that reaches this many bytes of the file is cut off there (once). */
  cutAt?: number;
  /** Bytes a second each GET sends at most (default: all at once). */
  bytesPerSecond?: number;
  /** Answer 401 unless `Authorization: Bearer <token>` is sent. */
  token?: string;
  /** Answer with a 302 to this address (with x-linked-size and x-linked-etag), as Hugging Face sends LFS files to its CDN. */
  redirect?: string;
  /** Refuse HEAD (405), as a store of addresses signed for GET does. */
  noHead?: boolean;
  /** Bodies start only once this settles (a test holds a download where it wants it). */
  gate?: Promise<unknown>;
  /** After this many bytes of a ranged GET, send nothing more and keep the connection open (a stalled transfer). */
  stallAt?: number;
}

export interface HubRequest {
  /** When it arrived (ms). */
  at: number;
  method: string;
  path: string;
  range?: string;
  authorization?: string;
  /** This request was the one cut off (`cutAt`). */
  cut?: boolean;
}

export interface TestHub {
  url: string;
  /** Serves `body` at `{repo}/resolve/{revision}/{file}`. */
  put(repo: string, file: string, spec: HubFile, revision?: string): void;
  /** Answers the manifest of `repo:quant` with `rfilename`. */
  manifest(repo: string, quant: string, rfilename: string): void;
  requests: HubRequest[];
  /** Bytes of file bodies the clients took so far (writes wait for the socket to drain). */
  sentBytes: number;
  /** The same, by request path. */
  sentTo: Map<string, number>;
  close(): Promise<void>;
}

export const sha256Hex = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

export async function startHub(): Promise<TestHub> {
  const files = new Map<string, HubFile & { cut?: boolean }>();
  const manifests = new Map<string, string>();
  const hub: TestHub = {
    url: "",
    requests: [],
    sentBytes: 0,
    sentTo: new Map(),
    put: (repo, file, spec, revision = "main") => files.set(`/${repo}/resolve/${revision}/${file}`, spec),
    manifest: (repo, quant, rfilename) => manifests.set(`/v2/${repo}/manifests/${quant}`, rfilename),
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections(); // a probe that read only the headers holds its connection open
      }),
  };

  const serveFile = async (req: IncomingMessage, res: ServerResponse, f: HubFile & { cut?: boolean }, seen: HubRequest) => {
    if (f.token && req.headers.authorization !== `Bearer ${f.token}`) {
      res.writeHead(401).end("gated");
      return;
    }
    const sha = f.sha256 === undefined ? sha256Hex(f.body) : f.sha256;
    const headers: Record<string, string> = { "accept-ranges": "bytes", "content-type": "application/octet-stream", etag: `"${sha ?? "0"}"` };
    if (sha) headers["x-linked-etag"] = `"${sha}"`;
    if (f.redirect) {
      res.writeHead(302, { ...headers, location: f.redirect, "x-linked-size": String(f.announcedSize ?? f.body.length) }).end();
      return;
    }
    if (req.method === "HEAD" && f.noHead) {
      res.writeHead(405).end();
      return;
    }
    if (req.method === "HEAD") {
      const size = f.announcedSize ?? f.body.length;
      res.writeHead(200, { ...headers, "content-length": String(size), "x-linked-size": String(size) }).end();
      return;
    }
    let start = 0;
    let end = f.body.length - 1;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    if (range) {
      start = Number(range[1]);
      end = range[2] ? Math.min(Number(range[2]), end) : end;
      if (start > end) {
        res.writeHead(416, { "content-range": `bytes */${f.body.length}` }).end();
        return;
      }
      res.writeHead(206, { ...headers, "content-length": String(end - start + 1), "content-range": `bytes ${start}-${end}/${f.body.length}` });
    } else {
      res.writeHead(200, { ...headers, "content-length": String(f.body.length) });
    }
    await f.gate;
    const sent = (n: number) => {
      hub.sentBytes += n;
      hub.sentTo.set(seen.path, (hub.sentTo.get(seen.path) ?? 0) + n);
    };
    const step = f.bytesPerSecond ? Math.max(1, Math.floor(f.bytesPerSecond / 20)) : end - start + 1;
    for (let at = start; at <= end; at += step) {
      const to = Math.min(end + 1, at + step);
      if (f.cutAt !== undefined && !f.cut && range && to > f.cutAt) {
        f.cut = true;
        seen.cut = true;
        if (at < f.cutAt) {
          res.write(f.body.subarray(at, f.cutAt));
          sent(f.cutAt - at);
        }
        await new Promise((r) => setTimeout(r, 50));
        req.socket.destroy(); // mid-body: the client sees the connection end early
        return;
      }
      if (res.destroyed) return;
      if (f.stallAt !== undefined && range && to > f.stallAt) {
        await new Promise((r) => res.once("close", r)); // holds the connection, sends nothing
        return;
      }
      // as a real server does: no more is queued than the client takes (a probe that reads only the headers gets little);
      // counted once the client took it
      if (!res.write(f.body.subarray(at, to))) {
        const drained = await new Promise<boolean>((r) => {
          // each wait takes its listeners away again: a long body waits many times on one response
          const onDrain = () => (res.off("close", onClose), r(true));
          const onClose = () => (res.off("drain", onDrain), r(false));
          res.once("drain", onDrain).once("close", onClose);
        });
        if (!drained) return;
      }
      sent(to - at);
      if (f.bytesPerSecond) await new Promise((r) => setTimeout(r, 50));
    }
    res.end();
  };

  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? "/", "http://hub").pathname);
    const seen: HubRequest = {
      at: Date.now(),
      method: req.method ?? "",
      path,
      ...(req.headers.range ? { range: req.headers.range } : {}),
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
    };
    hub.requests.push(seen);
    const manifest = manifests.get(path);
    if (manifest !== undefined) {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ggufFile: { rfilename: manifest } }));
      return;
    }
    const file = files.get(path);
    if (!file) {
      res.writeHead(404).end("Entry not found");
      return;
    }
    void serveFile(req, res, file, seen).catch(() => req.socket.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  hub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return hub;
}

/**
 * The egress guard: every outbound connection a tenant's configuration causes goes through one
 * `EgressPolicy`. A host is resolved once, every address it resolves to is checked, and the
 * connection is made to the checked address (no second lookup, so DNS rebinding cannot swap it).
 *
 * Allowed: global unicast addresses, and whatever the operator allows with `--mcp-allow-cidr`.
 * Refused: loopback, link-local (cloud metadata at 169.254.169.254), private, CGNAT, ULA,
 * multicast, unspecified, reserved, documentation and the IPv6 ranges that embed IPv4 addresses
 * (IPv4-mapped addresses are checked as the IPv4 address they carry).
 *
 * The clients use it through these doors: `fetch` (undici with a connector that resolves through
 * the policy; redirects never followed), `agent()` (a node:http(s) Agent for clients built on
 * node:http — Slack's, ws), `lookup` (for drivers that take a lookup function) and `resolve`
 * (for drivers that are handed the checked address to dial: PostgreSQL, MySQL). Sockets the
 * guard makes, or is handed (`guardSocket`), are held to `MAX_UPSTREAM_BYTES` and cannot throw
 * out of their data listeners.
 */
import { Resolver, type LookupAddress } from "node:dns";
import { Agent as HttpAgent, type AgentOptions } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { isIP, type LookupFunction, type Socket } from "node:net";
import { networkInterfaces } from "node:os";
import ipaddr from "ipaddr.js";
import { Agent as UndiciAgent, buildConnector, fetch as undiciFetch, type Dispatcher } from "undici";
import { KilnError } from "../../core/errors.js";

/** A connection a tenant's configuration asked for went to an address the policy refuses. */
export class EgressDeniedError extends KilnError {
  constructor(readonly host: string) {
    super("EGRESS_DENIED", `${host} is not a public address (loopback, private, link-local and similar ranges are refused)`);
  }
}

/** The name did not resolve, or the server answered with a redirect (never followed). */
export class EgressUnreachableError extends KilnError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("egress_unreachable", message, options);
  }
}

/** A tenant's server sent more than a client reads from it (the connection, or the response, was ended there). */
export class AnswerTooLargeError extends KilnError {
  constructor(readonly limit: number) {
    super("answer_too_large", `the server sent more than ${limit} bytes`);
  }
}

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** The most of one response, or of one connection's bytes, a client reads through the guard (the rest fails the read). */
export const MAX_UPSTREAM_BYTES = 8 * 1024 * 1024;

/**
 * The same socket, held to what a tenant's server may do to the client reading it: once more than
 * `maxBytes` have come it is destroyed (an `AnswerTooLargeError`), and a listener of its data
 * that throws (a client library's parser meeting bytes it never expected) destroys it with that
 * error instead of throwing out of the event loop. For clients that read with `data` events (the
 * database drivers, node:http, ws).
 */
export function guardSocket<S extends Socket>(socket: S, maxBytes = MAX_UPSTREAM_BYTES): S {
  let seen = 0;
  const emit = socket.emit as (this: S, event: string | symbol, ...args: unknown[]) => boolean;
  socket.emit = function (this: S, event: string | symbol, ...args: unknown[]): boolean {
    if (event !== "data") return emit.call(this, event, ...args);
    const chunk = args[0] as Buffer | string;
    seen += typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.byteLength;
    if (seen > maxBytes) {
      this.destroy(new AnswerTooLargeError(maxBytes));
      return false;
    }
    try {
      return emit.call(this, event, ...args);
    } catch (err) {
      this.destroy(new EgressUnreachableError(`the server's answer broke its client (${err instanceof Error ? err.message : String(err)})`, { cause: err }));
      return false;
    }
  } as S["emit"];
  return socket;
}

/** The response with a body that fails once more than `max` bytes have come (a server cannot fill the scheduler's memory). */
function capBody(res: Response, max: number): Response {
  if (!res.body || [101, 204, 205, 304].includes(res.status)) return res;
  let seen = 0;
  const capped = res.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > max) controller.error(new AnswerTooLargeError(max));
        else controller.enqueue(chunk);
      },
    }),
  );
  const out = new Response(capped, { status: res.status, statusText: res.statusText, headers: res.headers });
  Object.defineProperty(out, "url", { value: res.url }); // clients read it (Slack's does)
  return out;
}

/** Every IPv4 and IPv6 address of a name, by DNS queries that give up after `timeoutMs`. */
function aresResolver(timeoutMs: number): (host: string) => Promise<string[]> {
  return async (host) => {
    const resolver = new Resolver({ timeout: timeoutMs, tries: 1 });
    const ask = (query: (name: string, cb: (err: NodeJS.ErrnoException | null, addresses: string[]) => void) => void) =>
      new Promise<string[]>((resolve) => query.call(resolver, host, (err, addresses) => resolve(err ? [] : addresses)));
    const [v4, v6] = await Promise.all([ask(resolver.resolve4), ask(resolver.resolve6)]);
    return [...v4, ...v6];
  };
}

/** Parses one `--mcp-allow-cidr` value (`10.1.2.0/24`, `fd00::/8`, or a single address); throws on nonsense. */
export function parseCidr(text: string): Cidr {
  const t = text.trim();
  if (!t.includes("/")) {
    const addr = ipaddr.parse(t);
    return [addr, addr.kind() === "ipv4" ? 32 : 128];
  }
  return ipaddr.parseCIDR(t);
}

export interface EgressPolicyOptions {
  /** CIDRs the operator allows in spite of the built-in refusals (`--mcp-allow-cidr`). Default none. */
  allow?: string[];
  /** How long a name may take to resolve, in ms. Default 5000. */
  resolveTimeoutMs?: number;
  /**
   * The resolver: every address of a name. Default: DNS queries through c-ares (`dns.Resolver`),
   * which can time out and runs off libuv's thread pool (a tenant's slow name cannot hold the
   * threads that key checks and file I/O need, as `dns.lookup` would). It reads no hosts file.
   */
  resolveAll?: (host: string) => Promise<string[]>;
  /** This machine's addresses, refused even when public. Default: every interface's (`os.networkInterfaces()`). */
  ownAddresses?: string[];
}

/** Names that mean this machine, whatever DNS says. */
const LOCAL_NAME = /^(localhost|.*\.localhost)\.?$/i;

export class EgressPolicy {
  private readonly allowed: Cidr[];
  private readonly resolveAll: (host: string) => Promise<string[]>;
  /** The scheduler's own interface addresses: reaching them reaches services bound to 0.0.0.0. */
  private readonly own: Set<string>;

  constructor(private readonly options: EgressPolicyOptions = {}) {
    this.allowed = (options.allow ?? []).map(parseCidr);
    this.resolveAll = options.resolveAll ?? aresResolver(options.resolveTimeoutMs ?? 5000);
    const own =
      options.ownAddresses ??
      Object.values(networkInterfaces())
        .flat()
        .flatMap((i) => (i ? [i.address] : []));
    this.own = new Set(own.filter((a) => ipaddr.isValid(a)).map((a) => ipaddr.process(a).toString()));
  }

  /** The settings another process needs to build the same policy (a policy with a resolver of its own has none: a function does not travel). */
  portable(): Pick<EgressPolicyOptions, "allow" | "resolveTimeoutMs" | "ownAddresses"> {
    if (this.options.resolveAll) throw new Error("an EgressPolicy with its own resolveAll cannot be rebuilt in another process");
    const { allow, resolveTimeoutMs, ownAddresses } = this.options;
    return { ...(allow ? { allow } : {}), ...(resolveTimeoutMs !== undefined ? { resolveTimeoutMs } : {}), ...(ownAddresses ? { ownAddresses } : {}) };
  }

  /** True when a connection to `address` (an IP literal) is allowed. */
  permits(address: string): boolean {
    // a zone id (`fe80::1%eth0`) is refused whole: it names an interface, and the own-address check compares bare addresses
    if (address.includes("%") || !ipaddr.isValid(address)) return false;
    const addr = ipaddr.process(address); // IPv4-mapped IPv6 → the IPv4 address it carries
    for (const [net, bits] of this.allowed) {
      if (net.kind() === addr.kind() && addr.match([net, bits] as never)) return true;
    }
    if (this.own.has(addr.toString())) return false;
    // IPv4-compatible IPv6 (::a.b.c.d, deprecated) carries an IPv4 address ipaddr.js calls unicast.
    if (addr.kind() === "ipv6" && (addr as ipaddr.IPv6).parts.slice(0, 6).every((p) => p === 0)) return false;
    return addr.range() === "unicast";
  }

  /**
   * Resolves `host` once and checks every address it resolves to; returns the address to dial.
   * Throws `EgressDeniedError` when any is refused (a name that also resolves inward is refused
   * whole) and `EgressUnreachableError` when it does not resolve.
   */
  async resolve(host: string): Promise<LookupAddress> {
    const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
    if (bare.includes("%")) throw new EgressDeniedError(host); // an IPv6 zone id (`%eth0`, `%25eth0`, `%1`), on a literal or a name
    const family = isIP(bare);
    if (family) {
      if (!this.permits(bare)) throw new EgressDeniedError(host);
      return { address: bare, family };
    }
    if (LOCAL_NAME.test(bare)) throw new EgressDeniedError(host);
    const all = await this.resolveAll(bare);
    if (!all.length) throw new EgressUnreachableError(`${bare} does not resolve`);
    if (all.some((a) => !this.permits(a))) throw new EgressDeniedError(host);
    return { address: all[0]!, family: isIP(all[0]!) as 4 | 6 };
  }

  /** A `net` lookup function over `resolve`, for clients that take one (it is not called for IP literals: see `agent`). */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.resolve(hostname).then(
      (a) => ((options as { all?: boolean }).all ? (callback as (e: null, a: LookupAddress[]) => void)(null, [a]) : callback(null, a.address, a.family)),
      (err: NodeJS.ErrnoException) => callback(err, "", 0),
    );
  };

  /**
   * A node:http(s) Agent whose every socket goes through the policy: names through `lookup`,
   * IP literals (which `net` connects to without a lookup) checked before the socket is made.
   */
  agent(secure: boolean, options: AgentOptions = {}): HttpAgent {
    const agent = secure ? new HttpsAgent({ keepAlive: false, ...options }) : new HttpAgent({ keepAlive: false, ...options });
    type Create = (opts: { host?: string; lookup?: LookupFunction }, callback: (err: Error | null, socket?: Socket) => void) => Socket | undefined;
    const door = agent as unknown as { createConnection: Create };
    const create = door.createConnection.bind(agent);
    door.createConnection = (opts, callback) => {
      const host = opts.host ?? "localhost";
      if (isIP(host) && !this.permits(host)) {
        process.nextTick(() => callback(new EgressDeniedError(host)));
        return undefined;
      }
      const socket = create({ ...opts, lookup: this.lookup }, callback);
      return socket ? guardSocket(socket) : socket;
    };
    return agent;
  }

  /** An undici dispatcher that dials only checked addresses (TLS still verifies the name). */
  dispatcher(timeoutMs: number): Dispatcher {
    const connect = buildConnector({ timeout: timeoutMs });
    return new UndiciAgent({
      connect: (opts, callback) => {
        this.resolve(opts.hostname).then(
          (a) => connect({ ...opts, hostname: a.address, servername: opts.servername ?? (isIP(opts.hostname) ? undefined : opts.hostname) } as typeof opts, callback),
          (err: Error) => callback(err, null),
        );
      },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  }

  /**
   * `fetch` through the policy. Redirects are never followed: a redirect to a refused address is
   * an `EgressDeniedError`, any other an `EgressUnreachableError`. `close()` destroys every
   * connection it made (call it when done, or when the caller gives up).
   */
  fetch(timeoutMs: number, maxResponseBytes = MAX_UPSTREAM_BYTES): { fetch: typeof globalThis.fetch; close: () => Promise<void> } {
    const dispatcher = this.dispatcher(timeoutMs);
    const guarded = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
      const res = (await undiciFetch(input as never, { ...(init as object), redirect: "manual", dispatcher } as never)) as unknown as Response;
      if (res.status >= 300 && res.status < 400 && res.headers.has("location")) {
        await res.body?.cancel().catch(() => undefined);
        const target = new URL(res.headers.get("location")!, typeof input === "string" || input instanceof URL ? input : input.url);
        await this.resolve(target.hostname); // throws EgressDeniedError for an inward redirect
        throw new EgressUnreachableError(`the server answered with a redirect (${res.status}), which is not followed`);
      }
      return capBody(res, maxResponseBytes);
    };
    return { fetch: guarded as typeof globalThis.fetch, close: () => dispatcher.destroy() };
  }
}

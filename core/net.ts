/** Network addresses: listen and dial addresses (HOST:PORT), and which hosts are loopback. */
import { BlockList, isIP } from "node:net";

/** A listen or dial address. */
export interface HostPort {
  host: string;
  port: number;
}

/** `host:port`, an IPv6 host in brackets. */
export function formatHostPort({ host, port }: HostPort): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * `HOST:PORT`, `[IPv6]:PORT` or a bare `PORT` (loopback, never "" which would be every interface);
 * undefined when it is none of them or the port is over 65535.
 */
export function parseHostPort(text: string): HostPort | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text.trim()) ?? /^()()(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) return undefined;
  return { host: m[1] || m[2] || "127.0.0.1", port };
}

/** 127.0.0.0/8 and ::1: the addresses a plaintext gRPC link may use without `--grpc-insecure`. */
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

/** Whether `host` is a loopback address (127.0.0.0/8, ::1) or the name `localhost`. */
export function isLoopback(host: string): boolean {
  if (host.toLowerCase() === "localhost") return true;
  const family = isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 4 ? "ipv4" : "ipv6");
}

/**
 * A URL with its credentials masked, for logs and `--print-config`: the password of
 * `scheme://user:password@host` (whatever characters it holds, up to the last `@` before the
 * path) and any `password`/`sslpassword` query parameter, as `***`. Other text is returned unchanged.
 */
export function withoutPassword(text: string): string {
  if (!/^[a-z][\w+.-]*:\/\//i.test(text)) return text;
  return text.replace(/^([a-z][\w+.-]*:\/\/[^:/@?#]*:)(.*)@(?=[^@]*$)/i, "$1***@").replace(/([?&](?:ssl)?password=)[^&#]*/gi, "$1***");
}

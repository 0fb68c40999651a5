/**
 * The value schemas options are declared with: each takes the raw string of a flag, a `KILN_*`
 * variable or a config file and returns the typed value, or an issue saying what was expected.
 * Node-token entries have theirs in `node-tokens.ts`.
 */
import ipaddr from "ipaddr.js";
import { z } from "zod";
// refs.ts alone, not hub/index.ts: configuration is parsed by every command, and the downloader's imports are heavy
import { parseRef, type ModelRef } from "../hub/refs.js";
import { parseSpeculation, type Speculation } from "../core/speculation.js";
import { TIERS, isTier, type Tier } from "../core/tiers.js";
import { formatHostPort, parseHostPort, type HostPort } from "../core/net.js";

/** One HOST:PORT (`127.0.0.1:8080`, `[::1]:9000`). */
export const hostPort = z.string().transform((s, ctx): HostPort => {
  const address = parseHostPort(s);
  if (!address) {
    ctx.addIssue({ code: "custom", message: `expected HOST:PORT (e.g. 127.0.0.1:8080), got "${s}"` });
    return z.NEVER;
  }
  return address;
});

/** One or more HOST:PORT, comma-separated, none twice. */
export const hostPortList = z.string().transform((s, ctx): HostPort[] => {
  const addresses: HostPort[] = [];
  for (const part of s.split(",")) {
    const address = parseHostPort(part);
    if (!address) {
      ctx.addIssue({ code: "custom", message: `expected HOST:PORT, or several comma-separated (e.g. 10.0.0.1:50051,10.0.0.2:50051), got "${part.trim()}"` });
      return z.NEVER;
    }
    if (addresses.some((a) => a.host === address.host && a.port === address.port)) {
      ctx.addIssue({ code: "custom", message: `${formatHostPort(address)} is named twice` });
      return z.NEVER;
    }
    addresses.push(address);
  }
  return addresses;
});

/** A whole number from `min` to `max`, written in digits only. */
export const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.string().trim().regex(/^\d+$/, "expected a whole number").transform(Number).pipe(z.number().int().min(min).max(max));

/** A size: bare bytes or with a unit (`4mb`, `1.5gib`; k, m and g are powers of 1024); in bytes. */
export const bytes = z
  .string()
  .trim()
  .transform((s, ctx) => {
    const m = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$/i.exec(s);
    if (!m) {
      ctx.addIssue({ code: "custom", message: `expected a size like 4mb or 1048576, got "${s}"` });
      return z.NEVER;
    }
    const unit = (m[2] ?? "b").toLowerCase();
    const scale = unit.startsWith("g") ? 1024 ** 3 : unit.startsWith("m") ? 1024 ** 2 : unit.startsWith("k") ? 1024 : 1;
    return Math.floor(Number(m[1]) * scale);
  });

/** A duration: `90s`, `30m`, `12h`, `7d`, or bare seconds; in seconds. */
export const duration = z
  .string()
  .trim()
  .transform((s, ctx) => {
    const m = /^(\d+)\s*(s|m|h|d)?$/i.exec(s);
    if (!m) {
      ctx.addIssue({ code: "custom", message: `expected a duration like 90s, 30m, 12h or 7d, got "${s}"` });
      return z.NEVER;
    }
    const unit = (m[2] ?? "s").toLowerCase();
    return Number(m[1]) * (unit === "d" ? 86_400 : unit === "h" ? 3600 : unit === "m" ? 60 : 1);
  });

/** A size (`20gb`) or a share of the free disk (`25%`). */
export type SizeOrShare = { bytes: number } | { share: number };
export const sizeOrShare = z
  .string()
  .trim()
  .transform((s, ctx): SizeOrShare => {
    const pct = /^(\d+(?:\.\d+)?)\s*%$/.exec(s);
    if (pct) {
      const share = Number(pct[1]) / 100;
      if (share > 0 && share <= 1) return { share };
      ctx.addIssue({ code: "custom", message: `a share of the free disk must be above 0% and at most 100%, got "${s}"` });
      return z.NEVER;
    }
    const parsed = bytes.safeParse(s);
    if (!parsed.success || parsed.data < 1024 ** 2) {
      ctx.addIssue({ code: "custom", message: `expected a size of at least 1mb (like 20gb) or a share of the free disk (like 25%), got "${s}"` });
      return z.NEVER;
    }
    return { bytes: parsed.data };
  });

/** `*`, or an origin exactly as a browser sends it: scheme, host and port, no path. */
export const corsOrigin = z
  .string()
  .trim()
  .refine(
    (o) => {
      if (o === "*") return true;
      try {
        const url = new URL(o);
        return (url.protocol === "https:" || url.protocol === "http:") && url.origin === o;
      } catch {
        return false;
      }
    },
    { message: "expected * or an origin such as https://app.example.com (scheme, host and port; no path)" },
  );
/** Comma-separated items, trimmed, empty ones dropped. */
export const list = z.string().transform((s) =>
  s
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean),
);

/** An IPv4 or IPv6 range (`10.0.0.0/8`, `fd00::/8`) or a single address. */
export const cidr = z
  .string()
  .trim()
  .refine((s) => ipaddr.isValidCIDR(s) || ipaddr.isValid(s), { message: "expected a CIDR like 10.1.0.0/16 or an IP address" });

/**
 * An on/off switch: `true` (commander's value for a flag given without one), or `"true"`, `"1"`,
 * `"false"`, `"0"` from a `KILN_*` variable or a config file. Absent is off.
 */
export const bool = z
  .union([z.boolean(), z.string().trim()], { error: "expected true, false, 1 or 0" })
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v === false || v === "false" || v === "0") return false;
    if (v === true || v === "true" || v === "1") return true;
    ctx.addIssue({ code: "custom", message: `expected true, false, 1 or 0, got "${v}"` });
    return z.NEVER;
  });

/** A secret sent as `Authorization: Bearer <token>`: at least 16 characters, no whitespace. */
export const bearerSecret = z.string().min(16, "must be at least 16 characters").regex(/^\S+$/, 'cannot hold whitespace (it travels as "Bearer <token>")');

/** A model reference (`whisper:<name>`, `hf:<org>/<repo>/<file>.gguf`, `hf:<org>/<repo>:<quant>`), checked (hub/refs.ts). */
export const modelRef = z.string().transform((s, ctx): ModelRef => {
  try {
    return parseRef(s);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: (err as Error).message });
    return z.NEVER;
  }
});

/** `ID=GGUF` pairs of `--serve`: a file, or a hub reference pulled into `--models-dir` at start. */
export const serveSpec = z.string().transform((s, ctx): { id: string; path: string; ref?: string } => {
  const eq = s.indexOf("=");
  if (eq <= 0 || eq === s.length - 1) {
    ctx.addIssue({ code: "custom", message: `expected ID=GGUF (e.g. famB-v3.1=./model.gguf or famB-v3.1=hf:org/repo/file.gguf), got "${s}"` });
    return z.NEVER;
  }
  const id = s.slice(0, eq);
  const target = s.slice(eq + 1);
  if (!target.startsWith("hf:")) return { id, path: target };
  const ref = modelRef.safeParse(target);
  if (!ref.success) {
    ctx.addIssue({ code: "custom", message: ref.error.issues[0]!.message });
    return z.NEVER;
  }
  // the path is known once it is pulled (agent start); until then it is the reference
  return { id, path: ref.data.ref, ref: ref.data.ref };
});

/**
 * `ID=SPECULATION` pairs of `--speculative`: `ID=lookup` (prompt lookup) or `ID=draft:GGUF` (a draft
 * model: a file, or a hub reference pulled into `--models-dir` at start, like `--serve`'s).
 */
export const speculativeSpec = z.string().transform((s, ctx): { id: string; speculation: Speculation } => {
  const eq = s.indexOf("=");
  const parsed = eq > 0 ? parseSpeculation(s.slice(eq + 1)) : undefined;
  if (!parsed || typeof parsed === "string") {
    ctx.addIssue({
      code: "custom",
      message: `expected ID=lookup or ID=draft:GGUF (e.g. famB-v3.1=draft:./small.gguf or famB-v3.1=draft:hf:org/repo/file.gguf)${parsed ? `: ${parsed}` : `, got "${s.slice(0, 64)}"`}`,
    });
    return z.NEVER;
  }
  if (parsed.kind === "draft" && parsed.source.startsWith("hf:")) {
    const ref = modelRef.safeParse(parsed.source);
    if (!ref.success) {
      ctx.addIssue({ code: "custom", message: ref.error.issues[0]!.message });
      return z.NEVER;
    }
    return { id: s.slice(0, eq), speculation: { kind: "draft", source: ref.data.ref } };
  }
  return { id: s.slice(0, eq), speculation: parsed };
});

/** A hub's base URL: http(s), no query or fragment. */
export const hubUrl = z.string().transform((s, ctx) => {
  let url: URL | undefined;
  try {
    url = new URL(s);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash || url.username || url.password) {
    ctx.addIssue({ code: "custom", message: `expected an http(s) URL without credentials, query or fragment (e.g. https://huggingface.co), got "${s}"` });
    return z.NEVER;
  }
  return s.replace(/\/+$/, "");
});
/** `TIER=N` pairs, comma-separated, over `defaults`: a partial list changes only the tiers it names; N from `min` to `max`. */
export const tierCaps = (defaults: Readonly<Record<Tier, number>>, min = 1, max = 1_000_000) =>
  z.string().transform((s, ctx): Record<Tier, number> => {
    const caps = { ...defaults };
    const named = new Set<string>();
    for (const item of s
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean)) {
      const m = /^([a-z]+)\s*=\s*(\d+)$/i.exec(item);
      const tier = m?.[1]!.toLowerCase() ?? "";
      const n = Number(m?.[2]);
      let problem: string | undefined;
      if (!m) problem = `expected TIER=N pairs like pro=64 (tiers: ${TIERS.join(", ")}), got "${item}"`;
      else if (!isTier(tier)) problem = `unknown tier "${m[1]}" (tiers: ${TIERS.join(", ")})`;
      else if (named.has(tier)) problem = `tier "${tier}" is named twice`;
      else if (n < min || n > max) problem = `${tier}: expected a whole number from ${min} to ${max}, got ${m[2]}`;
      else {
        named.add(tier);
        caps[tier] = n;
        continue;
      }
      ctx.addIssue({ code: "custom", message: problem });
      return z.NEVER;
    }
    return caps;
  });

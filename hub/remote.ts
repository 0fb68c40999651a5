/**
 * What Kiln asks a model hub before it downloads: where a file really is and what it is (HEAD
 * requests on the hub's origin, its redirects followed here: Hugging Face sends `x-linked-size` and
 * `x-linked-etag` on the redirect of an LFS file to its CDN), and the file a `:<quant>` tag names
 * (the hub's llama.cpp manifest).
 *
 * The token goes to the hub's own origin only: the address of a redirect to another origin (a
 * CDN, or wherever a compromised mirror points) is handed to the downloader as it is, without the
 * token, so the downloader never carries it across origins itself. Messages name the hub without
 * credentials, and never a signed CDN address.
 */
import { PullError } from "./errors.js";
import { safePath } from "./refs.js";

/** Where files come from: the hub's base URL and the token for gated repositories. */
export interface HubSource {
  /** Base URL, e.g. `https://huggingface.co` (no trailing slash needed). */
  url: string;
  /** Sent as `Authorization: Bearer` to the hub's origin only. Default: none. */
  token?: string;
}

/** Longest a HEAD or manifest request may take. */
const REQUEST_TIMEOUT_MS = 30_000;
/** Redirects followed at most. */
const MAX_REDIRECTS = 5;
/** Largest manifest read. */
const MAX_MANIFEST_BYTES = 1024 ** 2;

/** The hub as messages name it: its address without credentials, query or trailing slash. */
export function hubLabel(hub: HubSource): string {
  const u = new URL(hub.url);
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "")}`;
}

/** `{hub}/{org}/{repo}/resolve/{revision}/{path}`, each segment escaped. */
export function resolveUrl(hub: HubSource, repo: string, revision: string, path: string): string {
  const escape = (p: string) => p.split("/").map(encodeURIComponent).join("/");
  return `${hub.url.replace(/\/+$/, "")}/${escape(repo)}/resolve/${escape(revision)}/${escape(path)}`;
}

/** Whether `url` is on the hub's own origin (the only place its token goes). */
export function onHub(hub: HubSource, url: string): boolean {
  return new URL(url).origin === new URL(hub.url).origin;
}

const headers = (hub: HubSource, url: string, extra: Record<string, string> = {}) => ({
  ...extra,
  ...(hub.token && onHub(hub, url) ? { Authorization: `Bearer ${hub.token}` } : {}),
});

/** The hub's answer in the operator's terms (`what`: the file, as the repository names it). */
function refused(status: number, what: string, hub: HubSource): PullError {
  if (status === 401 || status === 403)
    return new PullError("hub_refused", `${what} was refused (${status})${hub.token ? " with the HF_TOKEN given" : "; a gated repository needs HF_TOKEN"}`);
  if (status === 404) return new PullError("not_found", `${what} does not exist there (404)`);
  return new PullError("hub_unreachable", `${what} could not be read (HTTP ${status})`);
}

async function request(url: string, init: RequestInit, hub: HubSource, signal?: AbortSignal): Promise<Response> {
  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  try {
    return await fetch(url, { ...init, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    const why = timeout.aborted
      ? `no answer in ${REQUEST_TIMEOUT_MS / 1000} s`
      : (err as Error).cause instanceof Error
        ? ((err as Error).cause as Error).message
        : (err as Error).message;
    throw new PullError("hub_unreachable", `${new URL(url).host} could not be reached (${why})`, { cause: err });
  }
}

/** Where a file is, and its size and sha256 when the hub says. */
export interface RemoteFile {
  /** The address to download from: the last hop of the hub's redirects. */
  url: string;
  size?: number;
  sha256?: string;
}

/** The hub's `x-linked-etag` (or, from the hub's own origin, an etag that is a sha256), as a lowercase hex digest. */
function sha256Of(res: Response, hubOrigin: boolean): string | undefined {
  for (const name of hubOrigin ? ["x-linked-etag", "etag"] : ["x-linked-etag"]) {
    const tag = res.headers.get(name)?.replace(/^W\//, "").replaceAll('"', "").trim().toLowerCase();
    if (tag && /^[0-9a-f]{64}$/.test(tag)) return tag;
  }
  return undefined;
}

/**
 * Follows a file's redirects on the hub's origin with HEAD requests (the token sent there) and
 * returns the address to download from, with the size and sha256 the hub named on the way. A
 * redirect to another origin (a CDN's signed address, signed for GET alone) is not requested here:
 * its address is handed to the downloader as it is, without the token.
 * `what` names the file in messages (`acme/repo/resolve/main/file.bin`).
 */
export async function probeFile(url: string, hub: HubSource, what: string, signal?: AbortSignal): Promise<RemoteFile> {
  let at = url;
  let size: number | undefined;
  let sha256: string | undefined;
  const found = () => ({ url: at, ...(size !== undefined ? { size } : {}), ...(sha256 ? { sha256 } : {}) });
  for (let hop = 0; ; hop++) {
    const res = await request(at, { method: "HEAD", redirect: "manual", headers: headers(hub, at) }, hub, signal);
    const redirected = res.status >= 300 && res.status < 400;
    if (!res.ok && !redirected) throw refused(res.status, what, hub);
    const linked = Number(res.headers.get("x-linked-size") ?? (redirected ? NaN : res.headers.get("content-length")));
    if (size === undefined && Number.isSafeInteger(linked) && linked > 0) size = linked;
    sha256 ??= sha256Of(res, true);
    const location = res.headers.get("location");
    if (!redirected || !location) return found();
    if (hop >= MAX_REDIRECTS) throw new PullError("hub_unreachable", `${what} redirects more than ${MAX_REDIRECTS} times`);
    const next = new URL(location, at);
    if (!/^https?:$/.test(next.protocol)) throw new PullError("hub_unreachable", `${what} redirects to a ${next.protocol} address`);
    at = next.href;
    if (!onHub(hub, at)) return found();
  }
}

/** The path of the GGUF a repository's `:<quant>` tag names (`{hub}/v2/{org}/{repo}/manifests/{quant}`). */
export async function resolveQuant(hub: HubSource, org: string, repo: string, quant: string, signal?: AbortSignal): Promise<string> {
  const url = `${hub.url.replace(/\/+$/, "")}/v2/${encodeURIComponent(org)}/${encodeURIComponent(repo)}/manifests/${encodeURIComponent(quant)}`;
  const what = `the manifest of ${org}/${repo}:${quant}`;
  // the hub answers this manifest with its ggufFile only to llama.cpp's user agent; redirects are followed on the hub's origin only (a moved repository)
  let at = url;
  let res = await request(at, { redirect: "manual", headers: headers(hub, at, { "User-Agent": "llama-cpp", Accept: "application/json" }) }, hub, signal);
  for (let hop = 0; res.status >= 300 && res.status < 400 && res.headers.get("location") && hop < MAX_REDIRECTS; hop++) {
    at = new URL(res.headers.get("location")!, at).href;
    if (!onHub(hub, at)) throw new PullError("hub_unreachable", `${what} redirects off the hub`);
    res = await request(at, { redirect: "manual", headers: headers(hub, at, { "User-Agent": "llama-cpp", Accept: "application/json" }) }, hub, signal);
  }
  if (res.status === 404 || res.status === 400) throw new PullError("not_found", `${org}/${repo} has no quantization "${quant}"`);
  if (!res.ok) throw refused(res.status, what, hub);
  const text = await boundedText(res, MAX_MANIFEST_BYTES, what);
  let path: unknown;
  try {
    path = (JSON.parse(text) as { ggufFile?: { rfilename?: unknown } } | null)?.ggufFile?.rfilename;
  } catch {
    path = undefined;
  }
  if (typeof path !== "string" || !safePath(path) || !path.toLowerCase().endsWith(".gguf")) throw new PullError("hub_unreachable", `${what} has no usable ggufFile.rfilename`);
  return path;
}

/** A response's body as text, refused past `max` bytes (read no further). */
async function boundedText(res: Response, max: number, what: string): Promise<string> {
  const parts: Buffer[] = [];
  let bytes = 0;
  const reader = res.body?.getReader();
  for (;;) {
    const next = await reader?.read();
    if (!next || next.done) break;
    bytes += next.value.length;
    if (bytes > max) {
      await reader!.cancel().catch(() => undefined);
      throw new PullError("hub_unreachable", `${what} is larger than ${max} bytes`);
    }
    parts.push(Buffer.from(next.value));
  }
  return Buffer.concat(parts).toString("utf8");
}

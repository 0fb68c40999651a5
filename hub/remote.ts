/**
 * What Kiln asks a model hub before it downloads: a file's size and sha256 (a HEAD request, read
 * before any redirect: Hugging Face sends `x-linked-size` and `x-linked-etag` on the redirect of an
 * LFS file), and the file a `:<quant>` tag names (the hub's llama.cpp manifest). The token goes to
 * the hub only, never into a message.
 */
import { PullError } from "./errors.js";
import { safePath } from "./refs.js";

/** Where files come from: the hub's base URL and the token for gated repositories. */
export interface HubSource {
  /** Base URL, e.g. `https://huggingface.co` (no trailing slash needed). */
  url: string;
  /** Sent as `Authorization: Bearer` to the hub. Default: none. */
  token?: string;
}

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

const headers = (hub: HubSource, extra: Record<string, string> = {}) => ({ ...extra, ...(hub.token ? { Authorization: `Bearer ${hub.token}` } : {}) });

/** Fails with the hub's answer in the operator's terms. */
function refused(status: number, what: string, hub: HubSource): PullError {
  if (status === 401 || status === 403) {
    return new PullError("hub_refused", `${what}: ${hubLabel(hub)} answered ${status}${hub.token ? " with the HF_TOKEN given" : "; a gated repository needs HF_TOKEN"}`);
  }
  if (status === 404) return new PullError("not_found", `${what}: ${hubLabel(hub)} has no such file (404)`);
  return new PullError("hub_unreachable", `${what}: ${hubLabel(hub)} answered ${status}`);
}

async function request(url: string, init: RequestInit, what: string, hub: HubSource, signal?: AbortSignal): Promise<Response> {
  try {
    return await fetch(url, { ...init, ...(signal ? { signal } : {}) });
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    throw new PullError(
      "hub_unreachable",
      `${what}: ${hubLabel(hub)} could not be reached (${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message})`,
      { cause: err },
    );
  }
}

/** A file's size and, when the hub says, its sha256. */
export interface RemoteFile {
  size?: number;
  sha256?: string;
}

/** The hub's `x-linked-etag` (or, without one, an etag that is a sha256), as a lowercase hex digest. */
function sha256Of(res: Response): string | undefined {
  for (const name of ["x-linked-etag", "etag"]) {
    const tag = res.headers.get(name)?.replace(/^W\//, "").replaceAll('"', "").trim().toLowerCase();
    if (tag && /^[0-9a-f]{64}$/.test(tag)) return tag;
  }
  return undefined;
}

/** HEAD of a file: its size and sha256 as the hub reports them (either may be absent). */
export async function probeFile(url: string, hub: HubSource, what: string, signal?: AbortSignal): Promise<RemoteFile> {
  const res = await request(url, { method: "HEAD", redirect: "manual", headers: headers(hub) }, what, hub, signal);
  const redirected = res.status >= 300 && res.status < 400;
  if (!res.ok && !redirected) throw refused(res.status, what, hub);
  const size = Number(res.headers.get("x-linked-size") ?? (redirected ? NaN : res.headers.get("content-length")));
  const sha256 = sha256Of(res);
  return { ...(Number.isSafeInteger(size) && size > 0 ? { size } : {}), ...(sha256 ? { sha256 } : {}) };
}

/** The path of the GGUF a repository's `:<quant>` tag names (`{hub}/v2/{org}/{repo}/manifests/{quant}`). */
export async function resolveQuant(hub: HubSource, org: string, repo: string, quant: string, what: string, signal?: AbortSignal): Promise<string> {
  const url = `${hub.url.replace(/\/+$/, "")}/v2/${encodeURIComponent(org)}/${encodeURIComponent(repo)}/manifests/${encodeURIComponent(quant)}`;
  // the hub answers this manifest with its ggufFile only to llama.cpp's user agent
  const res = await request(url, { headers: headers(hub, { "User-Agent": "llama-cpp", Accept: "application/json" }) }, what, hub, signal);
  if (res.status === 404 || res.status === 400) throw new PullError("not_found", `${what}: ${hubLabel(hub)} has no quantization "${quant}" in ${org}/${repo}`);
  if (!res.ok) throw refused(res.status, what, hub);
  const body = (await res.json().catch(() => undefined)) as { ggufFile?: { rfilename?: unknown } } | undefined;
  const path = body?.ggufFile?.rfilename;
  if (typeof path !== "string" || !safePath(path) || !path.toLowerCase().endsWith(".gguf")) {
    throw new PullError("hub_unreachable", `${what}: ${hubLabel(hub)} sent a manifest without a usable ggufFile.rfilename`);
  }
  return path;
}

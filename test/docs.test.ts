/**
 * The docs stay true to the tree: every relative link resolves (a file, and a heading when it names
 * one), every flag docs/configuration.md lists is one the commands take, and every file or folder a
 * doc names in backticks exists.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { AGENT_OPTIONS, SCHEDULER_OPTIONS } from "../config/index.js";

/** The project's own Markdown files (what git tracks). */
const DOCS = execFileSync("git", ["ls-files", "*.md"], { encoding: "utf8" }).split("\n").filter(Boolean);

/** The text of a doc without its fenced code blocks (a shell example's `[` is no link). */
function prose(file: string): string {
  return readFileSync(file, "utf8").replace(/^```[\s\S]*?^```/gm, "");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, "")
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors of a Markdown file's headings (a repeated heading gets -1, -2, …). */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(file).matchAll(/^#{1,6}\s+(.+)$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Weights and media: what a doc names as data in a folder, never as a file of the repository. */
const DATA_FILE = /\.(gguf|onnx|bin|wav|mp3|flac|ogg|m4a|mp4|rttm|stm)$/;

/** Names of files the project keeps at its root (or beside a doc): its configurations, Markdown, the licence (not the files it writes at run time). */
const ROOT_FILE = /^((tsconfig[\w.-]*|package(-lock)?|stryker\.config)\.json|[\w-]+\.md|[\w-]+\.config\.[cm]?[jt]s|LICENSE)$/;

/** The top-level folders of the project a doc may name. */
const ROOTS = [
  "agent",
  "scheduler",
  "core",
  "config",
  "cli",
  "hub",
  "models",
  "speech",
  "fabricate",
  "scripts",
  "test",
  "docs",
  "proto",
  "systemd",
  "patches",
  "native",
  "bin",
  ".ci",
];

describe("the docs", () => {
  it("every relative link resolves to a file, and to a heading of it when it names one", () => {
    const broken: string[] = [];
    let links = 0;
    for (const doc of DOCS) {
      for (const m of prose(doc).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
        links++;
        const [path, anchor] = target.split("#") as [string, string | undefined];
        const file = path ? normalize(join(dirname(doc), path)) : doc;
        if (!existsSync(file)) broken.push(`${doc}: ${target} (no ${file})`);
        else if (anchor && file.endsWith(".md") && !anchors(file).has(anchor)) broken.push(`${doc}: ${target} (no heading #${anchor} in ${file})`);
      }
    }
    expect(links).toBeGreaterThan(20);
    expect(broken).toEqual([]);
  });

  it("every flag docs/configuration.md lists is one the scheduler or the agent takes", () => {
    const known = new Set(
      [...Object.values(SCHEDULER_OPTIONS), ...Object.values(AGENT_OPTIONS)].map((o) => (o as { flags: string }).flags.split(/[\s,]/)[0]!).concat(["--config", "--print-config"]),
    );
    const listed = [...readFileSync("docs/configuration.md", "utf8").matchAll(/^\| ([^|]+)\|/gm)].flatMap((m) => [...m[1]!.matchAll(/`(--[a-z0-9-]+)/g)].map((f) => f[1]!));
    expect(listed.length).toBeGreaterThan(50);
    expect(listed.filter((flag) => !known.has(flag))).toEqual([]);
  });

  it("every file or folder a doc names in backticks exists", () => {
    const missing: string[] = [];
    for (const doc of DOCS) {
      for (const m of prose(doc).matchAll(/`([^`\s]+)`/g)) {
        const name = m[1]!.replace(/:\d+(-\d+)?$/, "").replace(/[.,;]$/, "");
        const root = name.split("/")[0]!;
        // a path under one of the project's folders, or a file of its root (a config, a Markdown file, the licence);
        // model weights and media are data a doc names by where it goes, never files of the repository
        const rootFile = !name.includes("/") && ROOT_FILE.test(name);
        if ((!rootFile && (!name.includes("/") || !ROOTS.includes(root))) || /[*{}<>$?]|\.\.\./.test(name) || DATA_FILE.test(name)) continue;
        if (!existsSync(name) && !existsSync(join(dirname(doc), name))) missing.push(`${doc}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

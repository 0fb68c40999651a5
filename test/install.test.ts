/**
 * An install that runs: scripts/install-systemd.sh --root puts Kiln into a temporary root exactly
 * as into /, and the installed scheduler and agent run from that root alone (their working folder
 * and `bin/kiln.js` the units' own, under the root; the environment the units give them, their
 * paths moved under the root), with the operator's key made by the installed `kiln keys create`
 * on the database the unit names. node_modules is hard-linked (--link-node-modules): a copy is
 * 1 GB and 7 to 20 s on the suite's 2-core machine, for the same files (the whole test takes about 6 s).
 * A second install over the running one swaps in a new tree. The installer's own rules (the swap,
 * the modes and owners, --root's sysusers.d file, its arguments) are checked on a checkout of a
 * few small files, with an `id` that says it is not root (a script that forgot a rule must not
 * install into the real /opt/kiln).
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, closeSync, copyFileSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { wavFile } from "../scripts/lib/media.js";
import { TEST_SPEECH } from "../fabricate/index.js";
import { TEST_VAD, TEST_WHISPER_DIR } from "./helpers/speech.js";
import { KilnProcess, MODEL_ID, NODE_TOKEN, postChat, tempDir, TINY_MODEL } from "./helpers/fleet.js";

const ADMIN = "dashboard-admin-token-0123";

/**
 * A unit's settings: `Environment=` and its `EnvironmentFile=`'s variables (the file's win, as under
 * systemd, whatever their order in the unit), `WorkingDirectory=`, `ExecStart=`.
 */
function unitOf(root: string, name: string): { env: Record<string, string>; cwd: string; execStart: string } {
  const text = readFileSync(join(root, "etc/systemd/system", `${name}.service`), "utf8");
  const setting = (key: string): string[] => [...text.matchAll(new RegExp(`^${key}=(.*)$`, "gm"))].map((m) => m[1]!.trim());
  const env: Record<string, string> = {};
  const assign = (pair: string) => {
    const at = pair.indexOf("=");
    if (at > 0) env[pair.slice(0, at)] = pair.slice(at + 1);
  };
  for (const line of setting("Environment")) line.split(/\s+/).forEach(assign);
  for (const file of setting("EnvironmentFile"))
    for (const line of readFileSync(join(root, file), "utf8").split("\n")) if (line.trim() && !line.startsWith("#")) assign(line.trim());
  return { env, cwd: setting("WorkingDirectory")[0]!, execStart: setting("ExecStart")[0]! };
}

/** An absolute path of the installed system (a value, or a value's `ID=` or `KEY=` prefix kept), moved under `root`. */
const under = (root: string, value: string): string => value.replace(/^((?:[^=/]*=)?)(\/(?:opt|var|etc)\/)/, `$1${root}$2`);

/** What under `dir` (`skip`, a folder under it, left out) its group or others may write, links aside. */
function writable(dir: string, skip?: string): string[] {
  const found: string[] = [];
  const walk = (path: string, rel: string) => {
    const st = lstatSync(path);
    if (st.isSymbolicLink()) return;
    if (st.mode & 0o022) found.push(rel || ".");
    if (st.isDirectory()) for (const name of readdirSync(path)) if (!(rel === "" && name === skip)) walk(join(path, name), rel ? `${rel}/${name}` : name);
  };
  walk(dir, "");
  return found;
}

const procs: KilnProcess[] = [];
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop("SIGKILL")));
});

/** Starts `kiln <command>` as its unit would, from `root`, with `overrides` (loopback ports, the test fleet's token). */
function startUnit(root: string, unit: string, overrides: Record<string, string>): KilnProcess {
  const { env, cwd, execStart } = unitOf(root, unit);
  const [, script, command] = /^\/usr\/bin\/env node (\/\S+) (\S+)$/.exec(execStart) ?? [];
  expect(script, execStart).toBe("/opt/kiln/bin/kiln.js");
  const moved = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, under(root, v)]));
  const child = spawn(process.execPath, [under(root, script!), command!], {
    cwd: under(root, cwd),
    // systemd's environment: no variable of this process but PATH (and the run's TMPDIR, as PrivateTmp's /tmp)
    env: { PATH: process.env.PATH!, TMPDIR: process.env.TMPDIR!, HOME: join(root, "var/lib/kiln"), ...moved, ...overrides },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const proc = new KilnProcess(child);
  procs.push(proc);
  return proc;
}

/** The line matching `pattern`, or a failure with the process's last lines as soon as it exits. */
async function logged(proc: KilnProcess, pattern: RegExp): Promise<string> {
  const exited = proc.exited.then((code) => {
    throw new Error(`exited (${code}) before ${pattern}:\n${proc.lines.slice(-20).join("\n")}`);
  });
  return Promise.race([proc.waitFor(pattern, 30_000), exited]);
}

describe("scripts/install-systemd.sh --root", () => {
  it("installs a scheduler and an agent that run from the root alone: dashboard, web UI, a key, a completion, a transcription", async () => {
    const root = tempDir();
    const started = Date.now();
    const out = execFileSync("bash", ["scripts/install-systemd.sh", "--root", root, "--link-node-modules", "both"], { encoding: "utf8" });
    expect(out).toContain(`installed into ${root}`);
    const installedIn = Date.now() - started;
    // Written by its owner only (the linked node_modules is the checkout's own files).
    expect(writable(join(root, "opt/kiln"), "node_modules"), "group/world-writable under /opt/kiln").toEqual([]);
    // The operator's env file overrides the unit's Environment= (as systemd applies them): the spool moved.
    const unitSpool = /KILN_SPOOL_DIR=(\S+)/.exec(readFileSync(join(root, "etc/systemd/system/kiln-scheduler.service"), "utf8"))?.[1];
    const spool = "/var/lib/kiln/scheduler/spool-of-the-env-file";
    writeFileSync(join(root, "etc/kiln/scheduler.env"), `KILN_SPOOL_DIR=${spool}\n`, { flag: "a" });
    expect(unitOf(root, "kiln-scheduler").env.KILN_SPOOL_DIR).toBe(spool);
    // Nothing under /opt/kiln may be written by running it (ProtectSystem=strict keeps it read-only).
    const marker = join(root, "installed.marker");
    writeFileSync(marker, "");

    const scheduler = startUnit(root, "kiln-scheduler", {
      KILN_HTTP: "127.0.0.1:0",
      KILN_GRPC: "127.0.0.1:0",
      KILN_NODE_TOKENS: NODE_TOKEN,
      KILN_ADMIN_TOKEN: ADMIN,
    });
    const listening = JSON.parse(await logged(scheduler, /scheduler listening/)) as { http: string; grpc: string; db: string };
    const db = unitOf(root, "kiln-scheduler").env.KILN_DB!;
    expect(listening.db).toContain(under(root, db));
    const base = `http://${listening.http}`;

    const page = await fetch(`${base}/dashboard`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<script src="/dashboard/dashboard.js" type="module">');
    expect((await fetch(`${base}/dashboard/dashboard.js`)).status).toBe(200);

    // The chat model where the agent's env file says to put one (its commented KILN_SERVE line).
    const serve = /^#KILN_SERVE=(.*)$/m.exec(readFileSync(join(root, "etc/kiln/agent.env"), "utf8"))![1]!;
    const modelFile = under(root, serve.slice(serve.indexOf("=") + 1));
    expect(modelFile.startsWith(join(root, "var/lib/kiln/"))).toBe(true);
    mkdirSync(join(modelFile, ".."), { recursive: true });
    copyFileSync(TINY_MODEL, modelFile);
    // A whisper model and its VAD where the unit's KILN_WHISPER_DIR is (the fabricated ones).
    const whisperDir = under(root, unitOf(root, "kiln-agent").env.KILN_WHISPER_DIR!);
    mkdirSync(whisperDir, { recursive: true });
    copyFileSync(join(TEST_WHISPER_DIR, TEST_SPEECH.whisperFile), join(whisperDir, TEST_SPEECH.whisperFile));
    copyFileSync(TEST_VAD, join(whisperDir, "silero_vad.onnx"));
    const agent = startUnit(root, "kiln-agent", {
      KILN_SCHEDULER: listening.grpc,
      KILN_NODE_TOKEN: NODE_TOKEN,
      KILN_NODE_ID: "installed-1",
      KILN_SERVE: under(root, serve),
      KILN_HOST: "127.0.0.1",
      KILN_PORT: "0",
      KILN_GPU: "cpu",
      KILN_THREADS: "1",
      KILN_CONTEXT_SIZE: "2048",
      KILN_OFFLINE: "1",
    });
    const ui = (JSON.parse(await logged(agent, /transcription API listening/)) as { http: string }).http;
    const index = await fetch(`http://${ui}/`);
    expect(index.status).toBe(200);
    expect(await index.text()).toMatch(/<html/i);
    expect((await fetch(`http://${ui}/ui/app.js`)).status).toBe(200);
    await logged(agent, /registered with the scheduler/);

    // The operator's key, made as the README says, on the database the unit names.
    expect(readFileSync("README.md", "utf8").includes(`keys create --db ${db} `), `README's keys create names ${db}`).toBe(true);
    const created = execFileSync(process.execPath, [join(root, "opt/kiln/bin/kiln.js"), "keys", "create", "--db", under(root, db), "--account", "acme", "--tier", "pro"], {
      cwd: join(root, "opt/kiln"),
      env: { PATH: process.env.PATH!, TMPDIR: process.env.TMPDIR! },
      encoding: "utf8",
    });
    const key = /key:\s+(\S+)/.exec(created.split("\n")[1] ?? "")?.[1];
    expect(key, created).toBeTruthy();

    const chat = await postChat(base, key!, { model: MODEL_ID, messages: [{ role: "user", content: "Hello" }], max_tokens: 8, temperature: 0 });
    expect(chat.status, JSON.stringify(chat.body)).toBe(200);
    expect(chat.body.choices[0].message.content.length).toBeGreaterThan(0);

    // A transcription through the fleet: spooled where the unit says, in its state folder; nothing is written under /opt/kiln.
    const form = new FormData();
    form.append("file", new Blob([new Uint8Array(wavFile(1))]), "a.wav"); // the file before the model: spooled whole first
    form.append("model", "whisper-1");
    const audio = await fetch(`${base}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    // ffmpeg and the VAD (sherpa-onnx) of the installed node_modules hear no speech in a second of silence
    expect(audio.status).toBe(200);
    expect(await audio.json()).toMatchObject({ text: "" });
    const written = execFileSync("find", [join(root, "opt/kiln"), "-newer", marker], { encoding: "utf8" }).trim();
    expect(written, "written under /opt/kiln").toBe("");
    expect(unitSpool?.startsWith("/var/lib/kiln/scheduler/"), unitSpool).toBe(true);
    expect(existsSync(under(root, spool)), "the env file's spool").toBe(true);
    expect(existsSync(under(root, unitSpool!)), "the unit's spool, overridden").toBe(false);

    // Installed again, over the running services: a new tree swapped in (the old files, which they
    // have open and mapped, are not rewritten), a file of the old release gone, the env files kept.
    const stale = join(root, "opt/kiln/dist/removed-upstream.js");
    writeFileSync(stale, "");
    const inode = statSync(join(root, "opt/kiln/package.json")).ino;
    const agentEnv = readFileSync(join(root, "etc/kiln/agent.env"), "utf8");
    const again = execFileSync("bash", ["scripts/install-systemd.sh", "--root", root, "--link-node-modules", "both"], { encoding: "utf8" });
    expect(again).toContain(`installed into ${root}`);
    expect(existsSync(stale), "a file of the old tree").toBe(false);
    expect(statSync(join(root, "opt/kiln/package.json")).ino, "package.json rewritten in place").not.toBe(inode);
    expect(readdirSync(join(root, "opt"))).toEqual(["kiln"]);
    expect(readFileSync(join(root, "etc/kiln/agent.env"), "utf8")).toBe(agentEnv);
    // The running scheduler and agent still serve, to a key made by the new tree's `kiln keys create`.
    const second = execFileSync(process.execPath, [join(root, "opt/kiln/bin/kiln.js"), "keys", "create", "--db", under(root, db), "--account", "acme", "--tier", "pro"], {
      cwd: join(root, "opt/kiln"),
      env: { PATH: process.env.PATH!, TMPDIR: process.env.TMPDIR! },
      encoding: "utf8",
    });
    const key2 = /key:\s+(\S+)/.exec(second.split("\n")[1] ?? "")?.[1];
    expect(key2, second).toBeTruthy();
    const after = await postChat(base, key2!, { model: MODEL_ID, messages: [{ role: "user", content: "Hello" }], max_tokens: 8, temperature: 0 });
    expect(after.status, JSON.stringify(after.body)).toBe(200);
    console.log(`[install] installed in ${installedIn} ms; ran in ${Date.now() - started} ms`);
  });
});

/** A checkout of a few small files with the real script and units: group-writable, and a builder's where this runs as root. */
function smallCheckout(): string {
  const dir = tempDir();
  const files: Record<string, string> = {
    "package.json": "{}",
    "package-lock.json": "{}",
    "README.md": "kiln",
    "bin/kiln.js": "",
    "dist/index.js": "release 1",
    "node_modules/dep/index.js": "",
    "node_modules/.vite/results.json": "",
    "proto/kiln/v1/fleet.proto": "",
    "agent/ui/static/index.html": "",
    "scheduler/dashboard/static/dashboard.js": "",
  };
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  for (const file of ["scripts/install-systemd.sh", "systemd/kiln-agent.service", "systemd/kiln-scheduler.service"]) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    copyFileSync(file, join(dir, file));
  }
  // as under umask 002, by a builder who is not root
  execFileSync("chmod", ["-R", "g+w,o+w", dir]);
  if (process.getuid?.() === 0) execFileSync("chown", ["-R", "12345:12345", dir]);
  // an `id` that says this is not root: the real install (into /opt/kiln) stops at once
  mkdirSync(join(dir, "shims"));
  writeFileSync(join(dir, "shims/id"), "#!/bin/sh\necho 12345\n");
  chmodSync(join(dir, "shims/id"), 0o755);
  return dir;
}

/** Runs the small checkout's installer with `args`, from `cwd`. */
function install(checkout: string, args: string[], cwd = checkout) {
  return spawnSync("bash", [join(checkout, "scripts/install-systemd.sh"), ...args], {
    cwd,
    env: { PATH: `${join(checkout, "shims")}:${process.env.PATH}`, TMPDIR: process.env.TMPDIR! },
    encoding: "utf8",
  });
}

describe("scripts/install-systemd.sh's rules", () => {
  it("installs again by swapping in a new tree: the old files are not rewritten, the ones gone upstream go, a failed run's leftovers too", () => {
    const checkout = smallCheckout();
    const root = tempDir();
    expect(install(checkout, ["--root", root]).status).toBe(0);
    const prefix = join(root, "opt/kiln");
    writeFileSync(join(prefix, "dist/removed-upstream.js"), "");
    mkdirSync(join(root, "opt/kiln.new/half-copied"), { recursive: true }); // a run stopped midway
    writeFileSync(join(checkout, "dist/index.js"), "release 2");
    // what a running service has open (or mapped) keeps its content
    const running = openSync(join(prefix, "dist/index.js"), "r");
    try {
      const res = install(checkout, ["--root", root]);
      expect(res.status, res.stderr).toBe(0);
      const buf = Buffer.alloc(64);
      expect(buf.toString("utf8", 0, readSync(running, buf, 0, 64, 0)), "the running tree's file, rewritten").toBe("release 1");
    } finally {
      closeSync(running);
    }
    expect(readFileSync(join(prefix, "dist/index.js"), "utf8")).toBe("release 2");
    expect(existsSync(join(prefix, "dist/removed-upstream.js"))).toBe(false);
    expect(readdirSync(join(root, "opt"))).toEqual(["kiln"]);
    expect(existsSync(join(prefix, "node_modules/.vite")), "the test runner's cache").toBe(false);
  });

  it("makes the tree written by its owner only, the caller's (not the builder's), and declares the kiln user for systemd-sysusers", () => {
    const checkout = smallCheckout();
    const root = tempDir();
    const res = install(checkout, ["--root", root, "agent"]);
    expect(res.status, res.stderr).toBe(0);
    expect(writable(join(root, "opt/kiln")), "group/world-writable under /opt/kiln").toEqual([]);
    if (process.getuid?.() === 0) {
      const owners = execFileSync("find", [join(root, "opt/kiln"), "-not", "-uid", "0", "-o", "-not", "-gid", "0"], { encoding: "utf8" }).trim();
      expect(owners, "not the caller's").toBe("");
    }
    expect(readFileSync(join(root, "etc/systemd/system/kiln-agent.service"), "utf8")).not.toMatch(/^SupplementaryGroups=/m);
    const conf = readFileSync(join(root, "usr/lib/sysusers.d/kiln.conf"), "utf8");
    expect(conf).toMatch(/^u kiln - "Kiln" \/var\/lib\/kiln /m);
    expect(conf).toMatch(/^m kiln video$/m);
    expect(conf).toMatch(/^m kiln render$/m);
    const sysusers = spawnSync("systemd-sysusers", ["--dry-run", `--root=${root}`], { encoding: "utf8" });
    if (sysusers.error) return; // not installed here
    const said = sysusers.stdout + sysusers.stderr;
    expect(sysusers.status, said).toBe(0);
    expect(said).toContain("Creating user 'kiln' (Kiln)");
    expect(said).not.toMatch(/invalid|ignor|fail|warn|syntax/i);
  });

  it("refuses --link-node-modules without --root (it would share the checkout's inodes with /opt/kiln)", () => {
    const checkout = smallCheckout();
    const res = install(checkout, ["--link-node-modules", "both"]);
    expect(res.status, res.stderr).toBe(2);
    expect(res.stderr).toMatch(/--link-node-modules[^\n]*--root/);
    expect(res.stderr).toContain("usage:");
  });

  it("takes a relative --root from the caller's folder, not the checkout's", () => {
    const checkout = smallCheckout();
    const cwd = tempDir();
    const res = install(checkout, ["--root", "images/one", "scheduler"], cwd);
    expect(res.status, res.stderr).toBe(0);
    expect(res.stdout).toContain(`installed into ${join(cwd, "images/one")}`);
    expect(existsSync(join(cwd, "images/one/opt/kiln/dist/index.js"))).toBe(true);
    expect(existsSync(join(checkout, "images")), "installed into the checkout").toBe(false);
  });
});

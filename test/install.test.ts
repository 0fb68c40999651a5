/**
 * An install that runs: scripts/install-systemd.sh --root puts Kiln into a temporary root exactly
 * as into /, and the installed scheduler and agent run from that root alone (their working folder
 * and `bin/kiln.js` the units' own, under the root; the environment the units give them, their
 * paths moved under the root), with the operator's key made by the installed `kiln keys create`
 * on the database the unit names. node_modules is hard-linked (--link-node-modules): a copy is
 * 1 GB and 7 to 20 s on the suite's 2-core machine, for the same files (the whole test takes about 6 s).
 */
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { wavFile } from "../scripts/lib/media.js";
import { TEST_SPEECH } from "../fabricate/index.js";
import { TEST_VAD, TEST_WHISPER_DIR } from "./helpers/speech.js";
import { KilnProcess, MODEL_ID, NODE_TOKEN, postChat, tempDir, TINY_MODEL } from "./helpers/fleet.js";

const ADMIN = "dashboard-admin-token-0123";

/** A unit's settings: `Environment=` and its `EnvironmentFile=`'s variables, `WorkingDirectory=`, `ExecStart=`. */
function unitOf(root: string, name: string): { env: Record<string, string>; cwd: string; execStart: string } {
  const text = readFileSync(join(root, "etc/systemd/system", `${name}.service`), "utf8");
  const setting = (key: string): string[] => [...text.matchAll(new RegExp(`^${key}=(.*)$`, "gm"))].map((m) => m[1]!.trim());
  const env: Record<string, string> = {};
  const assign = (pair: string) => {
    const at = pair.indexOf("=");
    if (at > 0) env[pair.slice(0, at)] = pair.slice(at + 1);
  };
  for (const file of setting("EnvironmentFile"))
    for (const line of readFileSync(join(root, file), "utf8").split("\n")) if (line.trim() && !line.startsWith("#")) assign(line.trim());
  for (const line of setting("Environment")) line.split(/\s+/).forEach(assign);
  return { env, cwd: setting("WorkingDirectory")[0]!, execStart: setting("ExecStart")[0]! };
}

/** An absolute path of the installed system (a value, or a value's `ID=` or `KEY=` prefix kept), moved under `root`. */
const under = (root: string, value: string): string => value.replace(/^((?:[^=/]*=)?)(\/(?:opt|var|etc)\/)/, `$1${root}$2`);

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
    const spool = unitOf(root, "kiln-scheduler").env.KILN_SPOOL_DIR;
    expect(spool?.startsWith("/var/lib/kiln/scheduler/"), spool).toBe(true);
    expect(existsSync(under(root, spool!))).toBe(true);
    console.log(`[install] installed in ${installedIn} ms; ran in ${Date.now() - started} ms`);
  });
});

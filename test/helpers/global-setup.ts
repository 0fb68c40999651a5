/**
 * Fabricates the test models once per run; subprocess suites need the compiled CLI in dist/. Every
 * temporary file of the run (the test processes' and the `kiln` children's, which inherit TMPDIR) goes
 * in one folder, removed at the end: runs used to leave thousands of folders in /tmp.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureTestModel, ensureTestSpeechModels } from "../../fabricate/index.js";
import { leakedLines, PROCESS_LOG_DIR } from "./secrets.js";
import { postgresServerUrl } from "./db.js";
import { postgresBin, startPostgres, type Postgres } from "./postgres.js";

/**
 * With KILN_TEST_DB=postgres (`npm run test:postgres`): one throwaway PostgreSQL server for the
 * run, its URL in KILN_TEST_POSTGRES_URL, where every test's scheduler gets a database of its own.
 */
async function postgresRun(): Promise<Postgres | undefined> {
  if (process.env.KILN_TEST_DB !== "postgres") return undefined;
  const bin = postgresBin();
  if (!bin) throw new Error("KILN_TEST_DB=postgres: PostgreSQL's server binaries are not installed (Debian: apt-get install postgresql)");
  const server = await startPostgres(bin);
  process.env.KILN_TEST_POSTGRES_URL = postgresServerUrl(server.port); // the test workers inherit it
  console.log(`[kiln] the suite runs against PostgreSQL (127.0.0.1:${server.port}): every scheduler gets a database of its own`);
  return server;
}

export default async function setup(): Promise<() => void> {
  // Each vitest project (lane) names this setup; the run needs it once (one temporary folder, one PostgreSQL).
  if (process.env.KILN_TEST_SETUP) return () => undefined;
  process.env.KILN_TEST_SETUP = "1";
  rmSync(PROCESS_LOG_DIR, { recursive: true, force: true });
  const runTmp = mkdtempSync(join(tmpdir(), "kiln-run-"));
  chmodSync(runTmp, 0o1777); // as /tmp: servers the suites start as other users (PostgreSQL's initdb) reach their folders in it
  process.env.TMPDIR = runTmp; // os.tmpdir() of the test workers and of every process they start
  await ensureTestModel("tiny");
  await ensureTestSpeechModels();
  if (!existsSync("dist/cli/index.js")) throw new Error("dist/ is missing: run `npm test` (which builds first) or `npm run build`");
  const postgres = await postgresRun();
  if (!process.env.KILN_TEST_DATA)
    console.log("[kiln] KILN_TEST_DATA is not set: suites that need real test data (stories260K.gguf, silero_vad.onnx, jfk.wav, en-60s.wav) are skipped");
  // At the end of the run: no log line of any spawned process may carry a secret.
  return () => {
    postgres?.stop();
    rmSync(runTmp, { recursive: true, force: true });
    if (!existsSync(PROCESS_LOG_DIR)) return;
    const leaks = readdirSync(PROCESS_LOG_DIR).flatMap((f) => leakedLines(readFileSync(join(PROCESS_LOG_DIR, f), "utf8")).map((l) => `${f}: ${l.slice(0, 200)}`));
    if (leaks.length) {
      // vitest reports a teardown error but keeps the exit status: set it, so the run fails.
      process.exitCode = 1;
      throw new Error(`secrets in process logs:\n${leaks.join("\n")}`);
    }
    console.log(`[kiln] secret scan: ${readdirSync(PROCESS_LOG_DIR).length} process logs, no secret found`);
  };
}

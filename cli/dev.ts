/**
 * `kiln dev`: a scheduler and one agent in one process, with a fresh dev API key printed.
 * With no `--serve`, the agent serves the fabricated random-weight model (noise, but every path is real).
 */
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { AGENT_OPTIONS, nodeIdMatcher, parseAgentConfig, parseNodeTokenEntry, parseSchedulerConfig, formatHostPort } from "../config/index.js";
import { createLogger } from "../core/log.js";
import { DEV_MODEL_ID } from "../models/catalog.js";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { WhisperCatalog } from "../models/whisper.js";
import { ensureTestModel, ensureTestSpeechModels } from "../fabricate/index.js";
import { startAgent } from "../agent/index.js";
import { startScheduler } from "../scheduler/index.js";
import { onShutdown } from "./shutdown.js";

const DEV_KEY_DAYS = 30;

export async function runDev(raw: Record<string, string | string[] | undefined>): Promise<void> {
  // The agent's token: the first given one that may register its node id (or a fresh one).
  const nodeId = String(raw.nodeId ?? AGENT_OPTIONS.nodeId.default);
  const given = raw.nodeTokens
    ? String(raw.nodeTokens)
        .split(",")
        .map((t) => parseNodeTokenEntry(t.trim()))
    : [];
  const nodeToken = (given.find((t) => nodeIdMatcher(t.nodeIds)(nodeId)) ?? given[0])?.token ?? randomBytes(24).toString("base64url");
  // The dashboard's admin token: the given one, or a fresh one printed below.
  const adminToken = raw.adminToken ? String(raw.adminToken) : randomBytes(18).toString("base64url");
  const schedulerConfig = parseSchedulerConfig({ ...raw, nodeTokens: raw.nodeTokens ?? nodeToken, adminToken });
  const logger = createLogger("kiln-dev", schedulerConfig.logLevel);

  let serve = raw.serve as string[] | undefined;
  if (!serve?.length) {
    const path = await ensureTestModel("tiny", resolve(".kiln", "models"));
    logger.warn({ model: DEV_MODEL_ID, path }, "no --serve given: serving the fabricated random-weight test model (its replies are noise)");
    serve = [`${DEV_MODEL_ID}=${path}`];
  }

  // Likewise for transcription: with no whisper model installed, the fabricated tiny one (noise
  // words, real pipeline) under the name "base", and the energy VAD in place of Silero.
  let { whisperDir, vadModel } = raw as { whisperDir?: string; vadModel?: string };
  if (!WhisperCatalog.builtin.models.some((m) => existsSync(join(resolve(whisperDir ?? AGENT_OPTIONS.whisperDir.default), m.file)))) {
    const speech = await ensureTestSpeechModels(resolve(".kiln", "models"));
    whisperDir = speech.whisperDir;
    vadModel ??= speech.vadModel;
    logger.warn({ whisperDir, vadModel }, "no whisper model in --whisper-dir: transcribing with the fabricated random-weight test model (its words are noise)");
  }

  const scheduler = await startScheduler(schedulerConfig, logger.child({ component: "scheduler" }));
  const agentConfig = parseAgentConfig({
    ...raw,
    serve,
    nodeToken,
    ...(whisperDir ? { whisperDir } : {}),
    ...(vadModel ? { vadModel } : {}),
    scheduler: formatHostPort({ host: connectable(scheduler.grpc.host), port: scheduler.grpc.port }),
  });
  const agent = await startAgent(agentConfig, logger.child({ component: "agent" })).catch(async (err: unknown) => {
    await scheduler.close();
    throw err;
  });
  const { token, id } = await scheduler.keys.create({ account: "dev", tier: "pro", expiresInSeconds: DEV_KEY_DAYS * 86_400 });
  const base = `http://${formatHostPort({ host: connectable(scheduler.http.host), port: scheduler.http.port })}/v1`;

  process.stdout.write(
    [
      "",
      "  Kiln dev is up.",
      `  API base:  ${base}`,
      `  Models:    ${agentConfig.serve.map((s) => s.id).join(", ")}`,
      `  Dashboard: ${base.replace(/\/v1$/, "")}/dashboard  (admin token: ${raw.adminToken ? "as given" : adminToken})`,
      `  Transcribe: http://${formatHostPort({ host: connectable(agent.http.host), port: agent.http.port })}/api  (POST /api/process, GET /api/status/{job_id}, GET /api/models)`,
      `  Dev key:   ${token}`,
      `             (key id ${id}, pro tier, expires in ${DEV_KEY_DAYS} days)`,
      "",
      `  curl ${base}/chat/completions -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" \\`,
      `    -d '{"model":"${agentConfig.serve[0]?.id ?? DEV_MODEL_ID}","messages":[{"role":"user","content":"Hello"}],"max_tokens":16}'`,
      "",
      "",
    ].join("\n"),
  );

  onShutdown(logger, async () => {
    await agent.close(agentConfig.drainSeconds * 1000);
    await scheduler.close();
  });
}

/** A listen address a local client can dial (0.0.0.0 / :: mean "this machine"). */
function connectable(host: string): string {
  return host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
}

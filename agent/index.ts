/**
 * `kiln agent`: loads the chat models, probes the hardware and joins the scheduler's fleet.
 */
import { isCatalogModel } from "../models/catalog.js";
import type { AgentConfig } from "../config/index.js";
import { ConfigError } from "../core/errors.js";
import { createLogger, type Logger } from "../core/log.js";
import { probeHardware } from "./hardware/index.js";
import { FleetLink } from "./link/index.js";
import { LlmEngine } from "./llm/index.js";

export interface AgentHandle {
  engine: LlmEngine;
  link: FleetLink;
  /** Drains (finishing running work within `deadlineMs`, default 0) and unloads the models. */
  close(deadlineMs?: number): Promise<void>;
}

export async function startAgent(config: AgentConfig, logger: Logger = createLogger("agent", config.logLevel)): Promise<AgentHandle> {
  for (const { id } of config.serve) {
    if (!isCatalogModel(id)) throw new ConfigError("--serve / KILN_SERVE", `"${id}" is not a catalog model id`);
  }
  if (config.serve.length === 0) logger.warn("no --serve given: this agent serves no chat model");
  const engine = await LlmEngine.load({
    models: config.serve,
    sequences: config.sequences,
    contextSize: config.contextSize,
    threads: config.threads,
    gpu: config.gpu,
    logger,
    ...(config.batchSize !== undefined ? { batchSize: config.batchSize } : {}),
  });
  const hardware = await probeHardware(engine.compute);
  logger.info({ compute: hardware.compute, gpus: hardware.gpus?.length ?? 0, cpu: hardware.cpu_model, cores: hardware.cpu_cores }, "hardware");
  const link = new FleetLink({ scheduler: config.scheduler, nodeToken: config.nodeToken, nodeId: config.nodeId, engine, hardware, logger });
  link.start();
  return {
    engine,
    link,
    async close(deadlineMs = 0) {
      await link.drain(deadlineMs);
      await engine.dispose();
    },
  };
}

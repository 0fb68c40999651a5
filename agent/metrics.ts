/** The agent's metrics: HTTP, transcription jobs and speed, chat sequences, the scheduler link. */
import { Counter, createHttpMetrics, Gauge, Histogram, type HttpMetrics } from "../core/metrics.js";
import type { WhisperPool } from "./asr/index.js";
import type { JobService } from "./jobs/index.js";
import type { SchedulerLinks } from "./link/index.js";
import type { LlmEngine } from "./llm/index.js";

export interface AgentMetrics extends HttpMetrics {
  /** Records a finished transcription job: its outcome and, when completed, its real-time factor. */
  jobFinished(outcome: "completed" | "error", audioSeconds?: number, wallSeconds?: number): void;
}

export function createAgentMetrics(sources: { jobs: () => JobService; whisper: () => WhisperPool; engine: LlmEngine; links: () => SchedulerLinks | undefined }): AgentMetrics {
  const http = createHttpMetrics("agent");
  const registers = [http.registry];
  const finished = new Counter({ name: "kiln_asr_jobs_total", help: "Finished transcription jobs by outcome", labelNames: ["outcome"] as const, registers });
  const rtf = new Histogram({
    name: "kiln_asr_realtime_factor",
    help: "Wall seconds per second of audio, per completed job",
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
    registers,
  });
  const audio = new Counter({ name: "kiln_asr_audio_seconds_total", help: "Seconds of audio transcribed", registers });
  new Gauge({
    name: "kiln_asr_jobs",
    help: "Transcription jobs now, by state",
    labelNames: ["state"] as const,
    registers,
    collect() {
      const { running, queued } = sources.jobs().counts();
      this.set({ state: "running" }, running);
      this.set({ state: "queued" }, queued);
    },
  });
  new Counter({
    name: "kiln_asr_chunks_decoded_total",
    help: "Chunks of speech (up to 30 s each) whisper decoded; a resumed job's kept chunks are not decoded again",
    registers,
    collect() {
      this.reset();
      this.inc(sources.whisper().chunksDecoded);
    },
  });
  new Gauge({
    name: "kiln_llm_sequences",
    help: "Chat generation sequences (slots), by state",
    labelNames: ["state"] as const,
    registers,
    collect() {
      const pools = sources.engine.modelPools;
      const busy = pools.reduce((n, p) => n + p.busy, 0);
      this.set({ state: "busy" }, busy);
      this.set({ state: "free" }, pools.reduce((n, p) => n + p.slots, 0) - busy);
    },
  });
  // speculative decoding, per loaded model that speculates (labelled with its first id)
  const speculating = () => sources.engine.modelPools.filter((p) => p.speculation).map((p) => ({ model: p.modelIds[0] ?? p.path, gate: p.speculation! }));
  new Counter({
    name: "kiln_llm_speculative_validated_total",
    help: "Predicted tokens the model confirmed (speculative decoding), by model; validated / (validated + refuted) is the acceptance rate",
    labelNames: ["model"] as const,
    registers,
    collect() {
      this.reset();
      for (const { model, gate } of speculating()) this.inc({ model }, gate.validated);
    },
  });
  new Counter({
    name: "kiln_llm_speculative_refuted_total",
    help: "Predicted tokens the model refuted (speculative decoding), by model",
    labelNames: ["model"] as const,
    registers,
    collect() {
      this.reset();
      for (const { model, gate } of speculating()) this.inc({ model }, gate.refuted);
    },
  });
  new Gauge({
    name: "kiln_llm_speculative_on",
    help: "1 while a model speculates, 0 while its acceptance keeps speculation off (it probes again after a while)",
    labelNames: ["model"] as const,
    registers,
    collect() {
      this.reset();
      for (const { model, gate } of speculating()) this.set({ model }, gate.on ? 1 : 0);
    },
  });
  new Gauge({
    name: "kiln_scheduler_connected",
    help: "links to schedulers that are up (1 with one scheduler)",
    registers,
    collect() {
      this.set(sources.links()?.connected ?? 0);
    },
  });
  return {
    ...http,
    jobFinished(outcome, audioSeconds, wallSeconds) {
      finished.inc({ outcome });
      if (outcome === "completed" && audioSeconds && wallSeconds !== undefined) {
        audio.inc(audioSeconds);
        rtf.observe(wallSeconds / audioSeconds);
      }
    },
  };
}

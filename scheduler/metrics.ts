/** The scheduler's metrics: HTTP, generation (tokens, time to first token) and the fleet's state. */
import { Counter, createHttpMetrics, Gauge, Histogram, Registry, type HttpMetrics } from "../core/metrics.js";
import { KilnError } from "../core/errors.js";
import type { CompletionEvent, Fleet } from "./fleet/index.js";
import type { UsageRow } from "./usage/index.js";

export interface SchedulerMetrics extends HttpMetrics {
  /** Passes a completion's events through, recording time to first token and token counts. */
  measure(events: AsyncIterable<CompletionEvent>, model: string): AsyncGenerator<CompletionEvent>;
  /** Counts an answered request of `account` (its usage-ledger row), when per-account counters are on. */
  account(row: Pick<UsageRow, "account" | "kind" | "promptTokens" | "completionTokens" | "audioSeconds">): void;
  /** `GET /metrics` with the per-account series too (`handler` serves the fleet-wide ones only): for a scrape that sent `--metrics-token`. */
  handlerWithAccounts(): Promise<Response>;
}

export interface SchedulerMetricsOptions {
  /**
   * Counters labelled by account (`kiln_account_*`): one series per account and kind, so off by
   * default (a network of many accounts would swell every scrape). Served by `handlerWithAccounts`
   * only, never by `handler`. Default false.
   */
  perAccount?: boolean;
}

export function createSchedulerMetrics(fleet: Fleet, options: SchedulerMetricsOptions = {}): SchedulerMetrics {
  const http = createHttpMetrics("scheduler");
  const registers = [http.registry];
  const ttft = new Histogram({
    name: "kiln_time_to_first_token_seconds",
    help: "From dispatch to the first generated text",
    labelNames: ["model"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const tokens = new Counter({ name: "kiln_tokens_total", help: "Tokens by model and kind (prompt, completion)", labelNames: ["model", "kind"] as const, registers });
  const rate = new Histogram({
    name: "kiln_generation_tokens_per_second",
    help: "Completion tokens per second of generation, per request",
    labelNames: ["model"] as const,
    buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500],
    registers,
  });
  const completions = new Counter({
    name: "kiln_completions_total",
    help: "Finished completions by model and finish reason",
    labelNames: ["model", "finish_reason"] as const,
    registers,
  });
  const failed = new Counter({
    name: "kiln_completions_failed_total",
    help: "Completions that ended in an error, by model and code (agent_lost: the node died mid-generation, a stream that cannot be saved)",
    labelNames: ["model", "code"] as const,
    registers,
  });
  new Gauge({
    name: "kiln_fleet_agents_connected",
    help: "Agents with an open stream",
    registers,
    collect() {
      this.set(fleet.snapshot().length);
    },
  });
  new Gauge({
    name: "kiln_fleet_queue_depth",
    help: "Requests waiting for a free slot",
    registers,
    collect() {
      this.set(fleet.queued);
    },
  });
  new Gauge({
    name: "kiln_fleet_slots",
    help: "Generation slots (sequences) across the fleet, by state",
    labelNames: ["state"] as const,
    registers,
    collect() {
      const pools = fleet.snapshot().flatMap((a) => a.pools);
      const busy = pools.reduce((n, p) => n + p.inflight, 0);
      this.set({ state: "busy" }, busy);
      this.set({ state: "free" }, pools.reduce((n, p) => n + p.slots, 0) - busy);
    },
  });
  new Counter({
    name: "kiln_node_reports_rejected_total",
    help: "Node reports past a bound the scheduler computed, by node and kind (prompt_tokens, completion_tokens, cached_tokens, audio_seconds: clamped; oversized_message: the link closed)",
    labelNames: ["node", "kind"] as const,
    registers,
    collect() {
      this.reset();
      for (const r of fleet.rejectedReports()) this.inc({ node: r.node, kind: r.kind }, r.count);
    },
  });
  // the per-account series live apart: they name every account and its usage, so only a scrape with the metrics token gets them
  const accounts = new Registry();
  accounts.setDefaultLabels({ component: "scheduler" });
  const perAccount = options.perAccount
    ? {
        requests: new Counter({
          name: "kiln_account_requests_total",
          help: "Answered requests by account and kind (chat, completion, embedding, transcription)",
          labelNames: ["account", "kind"] as const,
          registers: [accounts],
        }),
        tokens: new Counter({
          name: "kiln_account_tokens_total",
          help: "Tokens by account and kind (prompt, completion)",
          labelNames: ["account", "kind"] as const,
          registers: [accounts],
        }),
        audio: new Counter({ name: "kiln_account_audio_seconds_total", help: "Seconds of audio transcribed, by account", labelNames: ["account"] as const, registers: [accounts] }),
      }
    : undefined;
  return {
    ...http,
    async handlerWithAccounts() {
      const fleetWide = await http.registry.metrics();
      const own = await accounts.metrics();
      return new Response(own ? `${fleetWide.replace(/\n*$/, "\n")}${own}` : fleetWide, { headers: { "Content-Type": http.registry.contentType } });
    },
    account(row) {
      if (!perAccount) return;
      perAccount.requests.inc({ account: row.account, kind: row.kind });
      if (row.promptTokens) perAccount.tokens.inc({ account: row.account, kind: "prompt" }, row.promptTokens);
      if (row.completionTokens) perAccount.tokens.inc({ account: row.account, kind: "completion" }, row.completionTokens);
      if (row.audioSeconds) perAccount.audio.inc({ account: row.account }, row.audioSeconds);
    },
    async *measure(events, model) {
      const started = performance.now();
      let firstText: number | undefined;
      try {
        for await (const e of events) {
          if (e.type === "text" && firstText === undefined) {
            firstText = performance.now();
            ttft.observe({ model }, (firstText - started) / 1000);
          } else if (e.type === "done") {
            tokens.inc({ model, kind: "prompt" }, e.promptTokens);
            tokens.inc({ model, kind: "completion" }, e.completionTokens);
            completions.inc({ model, finish_reason: e.finishReason });
            const seconds = (performance.now() - (firstText ?? started)) / 1000;
            if (e.completionTokens > 1 && seconds > 0) rate.observe({ model }, (e.completionTokens - 1) / seconds);
          } else if (e.type === "embeddings") {
            tokens.inc({ model, kind: "prompt" }, e.promptTokens);
          }
          yield e;
        }
      } catch (err) {
        failed.inc({ model, code: err instanceof KilnError ? err.code : "internal_error" });
        throw err;
      }
    },
  };
}

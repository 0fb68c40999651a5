/**
 * A node that lies: a hand-made gRPC client of the fleet link holding a valid node token. It
 * registers what it is told (more slots or models than its token allows, when asked), answers
 * every completion with a word of text and the usage it is told to report (billions of tokens by
 * default), and every transcription with a transcript of the duration it is told (typed, as a
 * current agent answers a scheduler that sends typed options, or as an older agent's JSON text).
 * The node-trust tests and the hostile soak use it.
 */
import * as grpc from "@grpc/grpc-js";
import { fleetProto, NODE_TOKEN_METADATA, type AgentMessage, type SchedulerMessage__Output } from "../../proto/index.js";
import type { Transcript } from "../../speech/transcript.js";
import { doneAnswer, readsTyped } from "../../speech/wire.js";

/** What a liar reports by default: past every bound the scheduler could compute. */
export const LIE = 4_000_000_000;

export interface LiarOptions {
  /** The scheduler's gRPC address, `host:port`. */
  grpc: string;
  token: string;
  nodeId: string;
  /** Fields of the Register, over the default (one pool of `model`, 4 slots, 2048 context). */
  register?: Record<string, unknown>;
  /** The pool's model when `register` names no pools. */
  model?: string;
  /** The usage reported for every completion. Default `LIE` prompt and completion tokens. */
  usage?: { prompt_tokens: number; completion_tokens: number; cached_tokens: number };
  /** The transcript duration reported for every transcription, in seconds. Default `LIE`. */
  duration?: number;
  /**
   * How it sends transcripts: "typed" (TranscriptionDone.transcript), "json" (transcript_json, as an
   * agent from before typed messages). Default: as a current agent, typed to a request that carried typed options.
   */
  transcripts?: "typed" | "json";
  /** Instead of answering a completion, sends it this many chunks of `bytes` of text each (and no end). */
  flood?: { chunks: number; bytes: number };
}

export interface LiarLink {
  /** "registered", or the status code that ended the stream before it was. */
  outcome: Promise<"registered" | grpc.status>;
  /** The status that ended the stream, and its details. */
  ended: Promise<grpc.StatusObject>;
  write(message: AgentMessage): void;
  /** Completions it was sent. */
  completions: number;
  /** Request ids the scheduler cancelled. */
  cancels: string[];
  close(): void;
}

/** Connects and registers; answers what it is sent, with lies. */
export function connectLiar(options: LiarOptions): LiarLink {
  const Fleet = fleetProto().kiln.v1.Fleet;
  const client = new Fleet(options.grpc, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set(NODE_TOKEN_METADATA, `Bearer ${options.token}`);
  const call = client.Connect(metadata);
  let settle!: (o: "registered" | grpc.status) => void;
  const outcome = new Promise<"registered" | grpc.status>((r) => (settle = r));
  const ended = new Promise<grpc.StatusObject>((r) =>
    call.on("status", (s: grpc.StatusObject) => {
      settle(s.code);
      r(s);
    }),
  );
  call.on("error", () => undefined);
  // heartbeats, as an agent's: a silent node is dropped after 3 intervals
  const beat = setInterval(() => call.write({ heartbeat: {} }), 200);
  void ended.then(() => clearInterval(beat));
  const link: LiarLink = {
    outcome,
    ended,
    write: (m) => void call.write(m),
    completions: 0,
    cancels: [],
    close: () => {
      clearInterval(beat);
      call.cancel();
      client.close();
    },
  };
  const usage = options.usage ?? { prompt_tokens: LIE, completion_tokens: LIE, cached_tokens: 0 };
  const uploads = new Map<string, number>();
  /** Requests whose TranscriptionRequest carried typed options. */
  const typed = new Set<string>();
  call.on("data", (m: SchedulerMessage__Output) => {
    if (m.registered) settle("registered");
    if (m.cancel) link.cancels.push(m.cancel.request_id);
    if (m.completion) {
      link.completions++;
      const id = m.completion.request_id;
      if (options.flood) {
        const text = "x".repeat(options.flood.bytes);
        for (let i = 0; i < options.flood.chunks; i++) call.write({ chunk: { request_id: id, text } });
        return;
      }
      call.write({ chunk: { request_id: id, text: "lies" } });
      call.write({ done: { request_id: id, finish_reason: "stop", usage } });
    }
    if (m.transcription && readsTyped(m.transcription)) typed.add(m.transcription.request_id);
    if (m.audio) {
      const id = m.audio.request_id;
      const stored = (uploads.get(id) ?? 0) + m.audio.data.length;
      uploads.set(id, stored);
      call.write({ transcription_ack: { request_id: id, stored_bytes: stored } });
      if (m.audio.last) {
        const transcript: Transcript = { text: "lies", language: "en", duration: options.duration ?? LIE, task: "transcribe", model: "tiny", segments: [] };
        const asTyped = options.transcripts ? options.transcripts === "typed" : typed.delete(id);
        call.write({ transcription_done: doneAnswer(id, transcript, asTyped) });
      }
    }
  });
  call.write({
    register: { node_id: options.nodeId, agent_version: "liar", pools: [{ model_ids: [options.model ?? "famB-v3.1"], slots: 4, context_size: 2048 }], ...options.register },
  });
  return link;
}

export interface LiarReport {
  /** Links that registered. */
  registrations: number;
  /** Registrations refused, by what they claimed. */
  refused: Record<string, number>;
  /** Completions it was sent (and answered with lies). */
  completions: number;
  /** Oversized messages it sent. */
  oversized: number;
  /** Its links the scheduler closed after an oversized message. */
  linksClosed: number;
}

/**
 * The hostile soak's liar: until `deadline`, over and over, it claims 4,294,967,295 slots and a
 * model its token does not allow (each refused, it expects), then registers within its token and
 * serves with usage lies for a while, then sends a message past its kind's cap (its link closed).
 */
export function startLiar(options: { grpc: string; token: string; nodeId: string; model: string; log?: (line: string) => void }): {
  attack(deadline: number): Promise<void>;
  report(): LiarReport;
  stop(): void;
} {
  const report: LiarReport = { registrations: 0, refused: {}, completions: 0, oversized: 0, linksClosed: 0 };
  const base = { grpc: options.grpc, token: options.token, nodeId: options.nodeId, model: options.model };
  let current: LiarLink | undefined;
  let stopped = false;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** Registers `register` and, when refused, counts it under `claim`. */
  const tryRegister = async (claim: string, register?: Record<string, unknown>): Promise<LiarLink | undefined> => {
    const link = connectLiar({ ...base, ...(register ? { register } : {}) });
    const outcome = await Promise.race([link.outcome, sleep(10_000).then(() => "no answer" as const)]);
    if (outcome === "registered") {
      report.registrations++;
      return link;
    }
    report.refused[claim] = (report.refused[claim] ?? 0) + 1;
    link.close();
    return undefined;
  };

  return {
    async attack(deadline) {
      // serve at once, so the hostile tenant's requests have a node; the refusals and the flood in a loop
      current = await tryRegister("within its token");
      while (!stopped && Date.now() < deadline) {
        await sleep(3000);
        if (stopped || Date.now() >= deadline) break;
        await tryRegister("4294967295 slots", { pools: [{ model_ids: [options.model], slots: 4_294_967_295, context_size: 2048 }] });
        await tryRegister("a model outside its token", { pools: [{ model_ids: ["famB-v3.1"], slots: 4, context_size: 2048 }] });
        if (current) {
          report.completions += current.completions;
          current.completions = 0;
          const closed = current.ended.then(() => true);
          current.write({ chunk: { request_id: "none", text: "x".repeat(5 * 1024 * 1024) } }); // past a chunk's 4 MiB
          report.oversized++;
          if (await Promise.race([closed, sleep(5000).then(() => false)])) report.linksClosed++;
          current.close();
        }
        current = await tryRegister("within its token");
      }
    },
    report() {
      if (current) {
        report.completions += current.completions;
        current.completions = 0;
      }
      return report;
    },
    stop() {
      stopped = true;
      current?.close();
    },
  };
}

/**
 * The relay floor, a benchmark-only stand-in for the fleet (not part of the product): the same
 * topology as `kiln dev` with none of Kiln's code. A bare `node:http` server takes the request,
 * passes it as a `CompletionRequest` of Kiln's proto over a grpc-js `Fleet/Connect` stream to an
 * echo agent in a third process, which answers with one chunk of text and its done; the server
 * relays them to the client as OpenAI server-sent events. No authentication, validation, routing,
 * model or framework.
 *
 * Its time to first token is what the path's four trips between processes cost on the machine
 * (client → server → agent → server → client), a lower bound for the fleet's added time to first
 * token. By default the echo answers at once, so that its way back runs with the caches as the
 * trip in left them. A prompt's evaluation on the CPU reads every weight of the model first, and
 * the fleet's way back then runs with caches that hold none of its code or data: with
 * `evaluation`, the echo first reads as many bytes on as many threads (its "evaluation"), and
 * answers with the milliseconds that took as its text, which the client subtracts from its time
 * to first token as the fleet's time is taken net of direct's (`evaluationMs`).
 *
 * `startRelayFloor()` forks this file twice (roles `relay` and `echo`, chosen by `argv[2]`).
 */
import { fork, type ChildProcess } from "node:child_process";
import { Worker } from "node:worker_threads";
import { createServer, type ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { fleetProto, type AgentMessage__Output, type SchedulerMessage, type SchedulerMessage__Output, type AgentMessage } from "../../proto/index.js";

/** The relay's ports, sent to the parent once both servers listen. */
interface RelayPorts {
  http: number;
  grpc: number;
}

const sse = (data: unknown): string => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
const chunk = (model: string, delta: object, finish: string | null) => ({ object: "chat.completion.chunk", model, choices: [{ index: 0, delta, finish_reason: finish }] });

async function relay(): Promise<void> {
  let agent: grpc.ServerDuplexStream<AgentMessage__Output, SchedulerMessage> | undefined;
  const waiting = new Map<string, { res: ServerResponse; model: string }>();
  const server = new grpc.Server();
  server.addService(fleetProto().kiln.v1.Fleet.service, {
    Connect: (call: grpc.ServerDuplexStream<AgentMessage__Output, SchedulerMessage>) => {
      call.on("data", (m: AgentMessage__Output) => {
        if (m.register) {
          agent = call;
          call.write({ registered: { node_id: m.register.node_id, heartbeat_interval_ms: 0 } });
        } else if (m.chunk) {
          const w = waiting.get(m.chunk.request_id);
          w?.res.write(sse(chunk(w.model, { role: "assistant", content: m.chunk.text }, null)));
        } else if (m.done) {
          const w = waiting.get(m.done.request_id);
          waiting.delete(m.done.request_id);
          w?.res.end(sse(chunk(w.model, {}, m.done.finish_reason)) + sse({ ...chunk(w.model, {}, null), choices: [], usage: m.done.usage }) + sse("[DONE]"));
        }
      });
    },
  });
  const grpcPort = await new Promise<number>((ok, fail) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => (err ? fail(err) : ok(port))));
  let next = 0;
  const http = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (d: Buffer) => parts.push(d));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(parts).toString("utf8")) as { model: string; messages: { role: string; content: string }[] };
      const id = `floor-${next++}`;
      waiting.set(id, { res, model: body.model });
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
      agent!.write({ completion: { request_id: id, trace_id: id, model: body.model, messages: body.messages, max_tokens: 1, temperature: 0 } });
    });
  });
  await new Promise<void>((ok) => http.listen(0, "127.0.0.1", ok));
  const ports: RelayPorts = { http: (http.address() as { port: number }).port, grpc: grpcPort };
  process.send!(ports);
}

/**
 * Reads `bytes` of memory, a cache line at a time, on `threads` threads (this one and `threads` − 1
 * workers), as a CPU prompt evaluation reads the model's weights; returns how to run it once, in ms.
 */
function evaluation(bytes: number, threads: number): () => number {
  let sink = 0; // what was read, kept so that the reads are not optimized away
  const memory = new Uint8Array(new SharedArrayBuffer(bytes)).fill(1);
  const control = new Int32Array(new SharedArrayBuffer(8)); // [generation, threads done]
  const slice = Math.ceil(bytes / threads / 64) * 64;
  const read = (from: number): number => {
    let sum = 0;
    for (let i = from; i < Math.min(from + slice, bytes); i += 64) sum += memory[i]!;
    return sum;
  };
  const workerCode = `
    const { workerData: { memory, control, from, slice } } = require("node:worker_threads");
    const bytes = new Uint8Array(memory), ctl = new Int32Array(control);
    for (let generation = 0; ; ) {
      Atomics.wait(ctl, 0, generation);
      generation = Atomics.load(ctl, 0);
      let sum = 0;
      for (let i = from; i < Math.min(from + slice, bytes.length); i += 64) sum += bytes[i];
      globalThis.sink = sum;
      Atomics.add(ctl, 1, 1);
      Atomics.notify(ctl, 1);
    }`;
  for (let t = 1; t < threads; t++) {
    const worker = new Worker(workerCode, { eval: true, workerData: { memory: memory.buffer, control: control.buffer, from: t * slice, slice } });
    worker.on("error", (err) => {
      console.error(`relay floor: an evaluation thread failed: ${err.message}`);
      process.exit(1);
    });
    worker.unref();
  }
  return () => {
    const start = performance.now();
    Atomics.store(control, 1, 0);
    Atomics.add(control, 0, 1);
    Atomics.notify(control, 0);
    sink = read(0);
    for (let done; (done = Atomics.load(control, 1)) < threads - 1;) {
      if (Atomics.wait(control, 1, done, 10_000) === "timed-out") throw new Error("relay floor: an evaluation thread did not answer in 10 s");
    }
    return performance.now() - start;
  };
}

function echo(grpcPort: number, evaluate: (() => number) | undefined): void {
  const Fleet = fleetProto().kiln.v1.Fleet;
  const client = new Fleet(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
  const stream: grpc.ClientDuplexStream<AgentMessage, SchedulerMessage__Output> = client.Connect();
  stream.on("data", (m: SchedulerMessage__Output) => {
    if (m.registered) process.send!("ready");
    if (!m.completion) return;
    const id = m.completion.request_id;
    const ms = evaluate?.() ?? 0;
    stream.write({ chunk: { request_id: id, text: ms.toFixed(4) } });
    stream.write({ done: { request_id: id, finish_reason: "length", usage: { prompt_tokens: 0, completion_tokens: 1 } } });
  });
  stream.write({ register: { node_id: "relay-floor-echo", agent_version: "0", pools: [] } });
}

function message<T>(child: ChildProcess): Promise<T> {
  return new Promise((ok, fail) => {
    child.once("message", (m) => ok(m as T));
    child.once("exit", (code) => fail(new Error(`relay floor: a child exited (${code}) before it was ready`)));
  });
}

/** The most the echo reads as its evaluation (a model's weights beyond it sweep the caches no more). */
const MAX_EVALUATION_BYTES = 1024 ** 3;

export interface RelayFloorOptions {
  /** What the echo reads before it answers (at most 1 GiB), as a prompt's evaluation reads the weights (default: nothing, it answers at once). */
  evaluation?: { bytes: number; threads: number };
}

/**
 * Starts the relay and the echo agent; resolves to the relay's API base (…/v1) and a stop function.
 * Each answer's text is the echo's evaluation in ms (`evaluationMs`), "0.0000" without one.
 */
export async function startRelayFloor(options: RelayFloorOptions = {}): Promise<{ base: string; close: () => Promise<void> }> {
  const self = fileURLToPath(import.meta.url);
  const relayChild = fork(self, ["relay"], { stdio: "inherit" });
  const ports = await message<RelayPorts>(relayChild);
  const { bytes = 0, threads = 1 } = options.evaluation ?? {};
  // far more than the CPU's caches hold, and within one typed array (and the machine's memory)
  const read = Math.min(bytes, MAX_EVALUATION_BYTES);
  const echoChild = fork(self, ["echo", String(ports.grpc), String(read), String(threads)], { stdio: "inherit" });
  await message<string>(echoChild).catch((err: unknown) => {
    relayChild.kill("SIGTERM");
    throw err;
  });
  const stopChild = (child: ChildProcess) =>
    new Promise<void>((ok) => {
      if (child.exitCode !== null) return ok();
      child.once("exit", () => ok());
      child.kill("SIGTERM");
    });
  return {
    base: `http://127.0.0.1:${ports.http}/v1`,
    close: async () => {
      await stopChild(echoChild);
      await stopChild(relayChild);
    },
  };
}

/** The echo's evaluation in ms, from the text of a relay floor's answer. */
export function evaluationMs(text: string): number {
  const ms = Number(/"content":"([\d.]+)"/.exec(text)?.[1]);
  if (!Number.isFinite(ms)) throw new Error(`relay floor: no evaluation time in ${JSON.stringify(text.slice(0, 200))}`);
  return ms;
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) {
  if (process.argv[2] === "relay") void relay();
  else if (process.argv[2] === "echo") {
    const bytes = Number(process.argv[4]),
      threads = Number(process.argv[5]);
    echo(Number(process.argv[3]), bytes > 0 ? evaluation(bytes, threads) : undefined);
  }
}

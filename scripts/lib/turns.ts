/**
 * `bench:chat -- --turns N`: conversations whose history grows turn by turn, as an agentic client
 * sends them (the whole history again every turn), interleaved over a fleet of one scheduler and two
 * agents (child processes, each agent with one thread of its own). Each turn's time to first token
 * is measured twice in the same run:
 *
 * - with reuse: the conversations run turn by turn, one turn of each in turn, under one account;
 *   the scheduler routes each turn to the node holding its conversation and the agent gives it the
 *   slot that holds it (`cached_tokens` says how much was reused);
 * - without: afterwards, every recorded turn's request again, each under an account of its own (a
 *   cache scope no slot holds: its whole prompt is evaluated).
 *
 * Printed per turn: prompt tokens, cached tokens, the median TTFT of both and their ratio. Target
 * (issue 42): a later turn's TTFT ≤ 30 % of the same turn's without reuse.
 */
import { mkdtempSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { median } from "./cli.js";
import { freePort, kilnKey, started, stopped } from "./run.js";

const MODEL_ID = "famB-v3.1";
const NODE_TOKEN = "bench-turns-node-token-0123456789";
const SYSTEM = "You are a patient coding assistant. Answer briefly, and keep to what was asked.";

type Message = { role: "system" | "user" | "assistant"; content: string };

interface TurnSample {
  promptTokens: number;
  cachedTokens: number;
  ttftMs: number;
}

/** One streamed chat completion: its reply's text, time to first token and usage. */
function ask(base: string, agent: Agent, key: string, messages: Message[], maxTokens: number): Promise<TurnSample & { text: string }> {
  const body = JSON.stringify({ model: MODEL_ID, messages, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } });
  return new Promise((ok, fail) => {
    const start = performance.now();
    const req = request(
      `${base}/v1/chat/completions`,
      { method: "POST", agent, headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        let raw = "";
        let ttft = NaN;
        res.setEncoding("utf8");
        res.on("data", (piece: string) => {
          raw += piece;
          if (Number.isNaN(ttft) && /"content":"[^"]/.test(raw)) ttft = performance.now() - start;
        });
        res.on("error", fail);
        res.on("end", () => {
          if (res.statusCode !== 200) return fail(new Error(`HTTP ${res.statusCode}: ${raw.slice(0, 500)}`));
          let text = "";
          let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined;
          for (const line of raw.split("\n")) {
            if (!line.startsWith("data: {")) continue;
            const event = JSON.parse(line.slice(6)) as { choices?: { delta?: { content?: string } }[]; usage?: typeof usage };
            text += event.choices?.[0]?.delta?.content ?? "";
            if (event.usage) usage = event.usage;
          }
          ok({ text, ttftMs: ttft, promptTokens: usage?.prompt_tokens ?? 0, cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0 });
        });
      },
    );
    req.on("error", fail);
    req.end(body);
  });
}

/** A user message of about `words` words, different for each conversation and turn. */
function userMessage(conversation: number, turn: number, words: number): string {
  const vocabulary = ["the", "function", "returns", "a", "list", "of", "files", "that", "changed", "since", "last", "build", "and", "tests", "fail", "when"];
  const out = [`Conversation ${conversation}, step ${turn}: please look at this.`];
  for (let i = 0; i < words; i++) out.push(vocabulary[(i * 7 + conversation * 3 + turn * 5) % vocabulary.length]!);
  return out.join(" ");
}

export interface TurnsOptions {
  modelPath: string;
  turns: number;
  /** Conversations interleaved. */
  conversations: number;
  /** Tokens each reply may take. */
  replyTokens: number;
  /** About how many prompt tokens the last turn has (each user message is sized for it; the model's context must hold it and a reply). */
  lastPromptTokens: number;
}

export async function benchTurns(o: TurnsOptions): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-turns-"));
  const db = join(dir, "kiln.db");
  const [http, grpc] = [await freePort(), await freePort()];
  const env = { KILN_NODE_TOKENS: NODE_TOKEN, KILN_LOG_LEVEL: "warn" };
  const kiln = resolve("bin/kiln.js");
  const scheduler = await started(
    process.execPath,
    [kiln, "scheduler", "--http", `127.0.0.1:${http}`, "--grpc", `127.0.0.1:${grpc}`, "--db", db, "--log-level", "info"],
    /scheduler listening/,
    env,
  );
  const agents = [];
  try {
    for (const node of ["node-a", "node-b"]) {
      agents.push(
        await started(
          process.execPath,
          [
            kiln,
            "agent",
            "--scheduler",
            `127.0.0.1:${grpc}`,
            "--node-id",
            node,
            "--serve",
            `${MODEL_ID}=${o.modelPath}`,
            "--sequences",
            String(o.conversations),
            "--context-size",
            "4096",
            "--threads",
            "1",
            "--gpu",
            "cpu",
            "--port",
            "0",
            "--host",
            "127.0.0.1",
            "--data-dir",
            join(dir, node),
            "--log-level",
            "info",
          ],
          /registered with the scheduler/,
          { ...env, KILN_NODE_TOKEN: NODE_TOKEN },
        ),
      );
    }
    const base = `http://127.0.0.1:${http}`;
    const pool = new Agent({ keepAlive: true, maxSockets: 64 });
    const key = kilnKey(db, "bench-turns");
    // warm-up (both agents' first requests), and the tokens a word of the user messages takes
    for (let i = 0; i < 4; i++) await ask(base, pool, key, [{ role: "user", content: `warm-up ${i}` }], 4);
    const calibrate = async (words: number) => (await ask(base, pool, kilnKey(db, `calibrate-${words}`), [{ role: "user", content: userMessage(99, 0, words) }], 1)).promptTokens;
    const perWord = (await calibrate(100)) - (await calibrate(0));
    console.log(`${(perWord / 100).toFixed(2)} tokens a word; user messages sized for about ${o.lastPromptTokens} prompt tokens by turn ${o.turns}\n`);
    // what a turn adds besides its user message (the reply as the template renders it, the turn's markup): measured as it goes
    let others = 3 * o.replyTokens;
    let longest = 0;

    const histories: Message[][] = Array.from({ length: o.conversations }, () => [{ role: "system", content: SYSTEM }]);
    const asked: Message[][][] = Array.from({ length: o.turns }, () => []);
    const warm: TurnSample[][] = Array.from({ length: o.turns }, () => []);
    for (let t = 0; t < o.turns; t++) {
      const words = t === 0 ? Math.max(1, Math.floor(((o.lastPromptTokens / o.turns - others) * 100) / perWord)) : wordsFor(t);
      for (let c = 0; c < o.conversations; c++) {
        const messages: Message[] = [...histories[c]!, { role: "user", content: userMessage(c, t, words) }];
        const r = await ask(base, pool, key, messages, o.replyTokens);
        warm[t]!.push(r);
        asked[t]!.push(messages);
        histories[c] = [...messages, { role: "assistant", content: r.text }];
      }
      const now = Math.max(...warm[t]!.map((s) => s.promptTokens));
      if (t > 0) others = Math.max(0, now - longest - (words * perWord) / 100);
      longest = now;
      process.stderr.write(`turn ${t + 1}/${o.turns}: ${Math.round(median(warm[t]!.map((s) => s.promptTokens)))} prompt tokens\n`);
    }
    /** Words for turn t's user messages: the tokens left to the last turn, shared over the turns left. */
    function wordsFor(t: number): number {
      return Math.max(1, Math.floor((((o.lastPromptTokens - longest) / (o.turns - t) - others) * 100) / perWord));
    }
    const cold: TurnSample[][] = [];
    for (let t = 0; t < o.turns; t++) {
      const samples: TurnSample[] = [];
      for (const [c, messages] of asked[t]!.entries()) samples.push(await ask(base, pool, kilnKey(db, `bench-turns-cold-${t}-${c}`), messages, o.replyTokens));
      cold.push(samples);
    }
    pool.destroy();

    const rows = warm.map((w, t) => {
      const c = cold[t]!;
      return {
        turn: t + 1,
        "prompt tokens": Math.round(median(w.map((s) => s.promptTokens))),
        "cached (reuse)": Math.round(median(w.map((s) => s.cachedTokens))),
        "cached (none)": Math.round(median(c.map((s) => s.cachedTokens))),
        "TTFT reuse ms": median(w.map((s) => s.ttftMs)).toFixed(1),
        "TTFT none ms": median(c.map((s) => s.ttftMs)).toFixed(1),
        "reuse ÷ none": (median(w.map((s) => s.ttftMs)) / median(c.map((s) => s.ttftMs))).toFixed(3),
      };
    });
    console.table(rows);
    const later = rows.slice(Math.floor(o.turns / 2));
    const ratio = median(later.map((r) => Number(r["reuse ÷ none"])));
    console.log(
      `${o.conversations} conversations × ${o.turns} turns over two agents; later turns (${later[0]!.turn}–${o.turns}): median TTFT with reuse ÷ without ${ratio.toFixed(3)} (target ≤ 0.30); last turn ${rows.at(-1)!["reuse ÷ none"]} at ${rows.at(-1)!["prompt tokens"]} prompt tokens`,
    );
  } finally {
    for (const a of agents) await stopped(a);
    await stopped(scheduler);
  }
}

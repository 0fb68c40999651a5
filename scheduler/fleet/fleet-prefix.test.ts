/**
 * Prefix-aware routing: a conversation's next turn goes to the pool whose slots hold its earlier
 * turns, unless that pool is full or busier than the least loaded by more than PREFIX_MARGIN; never
 * by another account's conversation. Driven through the Fleet's agent-side interface with
 * recording links (the agents' slot choice is agent/llm/prefix-slots.test.ts).
 */
import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../../core/chat.js";
import { createLogger } from "../../core/log.js";
import { heartbeat, RecordingLink, servingNode } from "../../test/helpers/recording-link.js";
import { Fleet } from "./fleet.js";
import { MAX_PREFIX_MESSAGES, prefixChain, PrefixRecords } from "./prefixes.js";
import type { CompletionEvent } from "./types.js";

const MODEL = "famB-v3.1";

// long enough that a conversation holding it is worth routing by (PREFIX_MIN_BYTES)
const SYSTEM: ChatMessage = { role: "system", content: `You are a careful assistant. ${"Answer with care and cite the tools you used. ".repeat(12)}` };
const user = (content: string): ChatMessage => ({ role: "user", content });
const assistant = (content: string): ChatMessage => ({ role: "assistant", content });

/** Two nodes of `slots` slots each; `say` answers a request on its node with `reply` (streamed in two pieces). */
function twoNodes(slots = 4) {
  const f = new Fleet({ queueSize: 8, queueTimeoutMs: 5000, heartbeatMs: 60_000, logger: createLogger("test", "silent") });
  const links = { a: new RecordingLink(), b: new RecordingLink() };
  f.attach(servingNode("a", slots, { models: [MODEL] }), links.a);
  f.attach(servingNode("b", slots, { models: [MODEL] }), links.b);
  const nodeOf = (id: string) => (links.a.requests().includes(id) ? "a" : "b");
  /** Submits `messages` for `account`; resolves the node it went to and a function answering it. */
  const ask = (messages: ChatMessage[], account = "acct-1") => {
    const before = new Set([...links.a.requests(), ...links.b.requests()]);
    const events = f.submit({ model: MODEL, messages, account });
    const id = [...links.a.requests(), ...links.b.requests()].find((r) => !before.has(r));
    const node = id ? nodeOf(id) : undefined;
    const done = async (reply = "Sure.") => {
      const link = node === "a" ? links.a : links.b;
      f.receive(node!, link, { body: "chunk", chunk: { request_id: id!, text: reply.slice(0, 2), logprobs: [], index: 0, tool_calls: [] } });
      f.receive(node!, link, { body: "chunk", chunk: { request_id: id!, text: reply.slice(2), logprobs: [], index: 0, tool_calls: [] } });
      f.receive(node!, link, { body: "done", done: { request_id: id!, finish_reason: "stop", usage: null, finish_reasons: ["stop"], stop_text: "" } });
      const out: CompletionEvent[] = [];
      for await (const e of events) out.push(e);
      return out;
    };
    return { node, done };
  };
  /** A heartbeat saying `local` of the node's slots run its own work. */
  const busy = (node: "a" | "b", local: number) => heartbeat(f, node, links[node], [local]);
  return { f, links, ask, busy };
}

describe("prefix-aware routing", () => {
  it("sends a conversation's next turn to the node holding it while that node is within the margin of the least loaded", async () => {
    const { f, ask } = twoNodes();
    const first = [SYSTEM, user("Tell me about kilns.")];
    const turn1 = ask(first);
    expect(turn1.node).toBe("a"); // both idle: the first
    await turn1.done("Kilns fire clay.");
    // a is now busier (one of its four slots runs another account's work), b idle
    const other = ask([user("Unrelated question")], "acct-2");
    expect(other.node).toBe("a");
    const turn2 = ask([...first, assistant("Kilns fire clay."), user("How hot?")]);
    expect(turn2.node).toBe("a"); // load 0.25 ≤ 0 + PREFIX_MARGIN: its cache wins over b's idleness
    f.close();
  });

  it("sends the next turn elsewhere when the node holding it is busier than the margin allows, or full", async () => {
    const { f, ask, busy } = twoNodes();
    const first = [SYSTEM, user("Tell me about kilns.")];
    await ask(first).done("Kilns fire clay.");
    const next = [...first, assistant("Kilns fire clay."), user("How hot?")];
    busy("a", 3); // the node's own work holds three of a's four slots: 0.75 > 0 + PREFIX_MARGIN
    expect(ask(next).node).toBe("b");
    busy("a", 4); // full
    expect(ask([...next, assistant("Very."), user("And then?")]).node).toBe("b");
    f.close();
  });

  it("routes by load alone when what a node holds is too short to be worth waiting for", async () => {
    const { f, ask } = twoNodes();
    const first = [user("Hi there.")];
    await ask(first).done("Hello.");
    ask([user("busy")], "acct-3"); // a: one slot busy
    expect(ask([...first, assistant("Hello."), user("How are you?")]).node).toBe("b");
    f.close();
  });

  it("never routes by another account's conversation", async () => {
    const { f, ask } = twoNodes();
    const first = [SYSTEM, user("Tell me about kilns.")];
    await ask(first, "acct-1").done("Kilns fire clay.");
    ask([user("busy")], "acct-3"); // a: one slot busy
    // the same words from another account: no prefix of theirs is on a, so the least loaded (b)
    expect(ask([...first, assistant("Kilns fire clay."), user("How hot?")], "acct-2").node).toBe("b");
    f.close();
  });
});

describe("the fleet's prefix records", () => {
  it("forget a node's pools when it leaves", async () => {
    const { f, links, ask } = twoNodes();
    await ask([SYSTEM, user("Tell me about kilns.")]).done("Kilns fire clay.");
    expect(f.prefixes.size).toBe(3);
    f.detach("a", links.a, "gone");
    expect(f.prefixes.size).toBe(0);
    f.close();
  });
});

describe("PrefixRecords", () => {
  const chain = (...contents: string[]) => prefixChain("scope", undefined, contents.map(user));

  it("finds the pool holding the longest prefix, and forgets what a pool's slots no longer hold", () => {
    const r = new PrefixRecords<{ name: string }>();
    const p = { name: "p" };
    const q = { name: "q" };
    r.record(p, 1, chain("a", "b"));
    r.record(q, 1, chain("a"));
    expect(r.longest(chain("a", "b", "c"), () => true)).toEqual({ pools: [p], length: 2 });
    expect(r.longest(chain("a", "x"), () => true)?.length).toBe(1);
    // p's one slot goes to another conversation: it no longer holds a or b
    r.record(p, 1, chain("z"));
    expect(r.longest(chain("a", "b"), () => true)).toEqual({ pools: [q], length: 1 });
    r.drop(q);
    expect(r.longest(chain("a", "b"), () => true)).toBeUndefined();
    r.drop(p);
    expect(r.size).toBe(0);
  });

  it("keeps conversations that share only a system prompt apart while the pool has slots for them, as the agent does", () => {
    const r = new PrefixRecords<{ name: string }>();
    const p = { name: "p" };
    const conversation = (topic: string) => prefixChain("scope", undefined, [SYSTEM, user(topic), assistant("ok"), user("and?")]);
    r.record(p, 4, conversation("a"));
    r.record(p, 4, conversation("b"));
    expect(r.longest(conversation("a"), () => true)?.length).toBe(4);
    expect(r.longest(conversation("b"), () => true)?.length).toBe(4);
    // the next turn of a takes a's entry (all of it shared), not a new one
    r.record(p, 4, prefixChain("scope", undefined, [SYSTEM, user("a"), assistant("ok"), user("and?"), assistant("more"), user("then?")]));
    expect(r.longest(conversation("b"), () => true)?.length).toBe(4);
    expect(r.size).toBe(9); // the system prompt once, a's five and b's three links
  });

  it("hashes a message the same whether it arrives whole or streamed, and tells scopes, tools and roles apart", () => {
    expect(prefixChain("s", undefined, [user("hello")])).toEqual(prefixChain("s", undefined, [user("hello")]));
    expect(prefixChain("s", undefined, [user("hello")])).not.toEqual(prefixChain("t", undefined, [user("hello")]));
    expect(prefixChain("s", undefined, [user("hello")])).not.toEqual(prefixChain("s", undefined, [assistant("hello")]));
    expect(prefixChain("s", [{ name: "f", parameters: {} }], [user("hello")])).not.toEqual(prefixChain("s", undefined, [user("hello")]));
    expect(
      prefixChain(
        "s",
        undefined,
        Array.from({ length: MAX_PREFIX_MESSAGES + 5 }, (_, i) => user(String(i))),
      ),
    ).toHaveLength(MAX_PREFIX_MESSAGES);
  });
});

import { describe, expect, it, vi } from "vitest";
import { ChunkBatcher, type Piece } from "./coalesce.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Blocks the event loop for `ms`: time passes, but no timer can fire. */
const busy = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};
const texts = (sent: Piece[][]) => sent.map((pieces) => pieces.map((p) => `${p.request_id}:${p.text}`).join(" "));

describe("ChunkBatcher", () => {
  it("sends a completion's first piece at once and gathers the next ones for the interval", () => {
    // A mocked clock: on a loaded machine a real timer can fire late, and then the next piece is
    // (rightly) gathered rather than sent at once.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const sent: Piece[][] = [];
      const b = new ChunkBatcher((pieces) => sent.push(pieces), 30);
      b.push("a", "Once");
      expect(sent).toEqual([[{ request_id: "a", text: "Once" }]]);
      b.push("a", " upon"); // the link has not flushed for longer than the interval: at once
      b.push("a", " a");
      b.push("a", " time");
      expect(sent).toHaveLength(2);
      vi.advanceTimersByTime(30);
      expect(sent.slice(1)).toEqual([[{ request_id: "a", text: " upon" }], [{ request_id: "a", text: " a time" }]]);
      vi.advanceTimersByTime(30);
      b.push("a", ",");
      b.push("a", " there");
      b.end("a");
      expect(sent.slice(3)).toEqual([[{ request_id: "a", text: "," }], [{ request_id: "a", text: " there" }]]);
      vi.advanceTimersByTime(40);
      expect(sent).toHaveLength(5);
    } finally {
      vi.useRealTimers();
    }
  });

  it("gathers a call's argument pieces after the text before them, a new call's first piece (its name) kept apart; text after calls is never merged before them", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const sent: Piece[][] = [];
      const b = new ChunkBatcher((pieces) => sent.push(pieces), 30);
      b.push("a", "Let me check.");
      b.push("a", " One"); // at once: the link's last flush is old
      b.push("a", " moment.");
      b.pushToolCall("a", { index: 0, name: "get_weather", arguments: "" });
      b.pushToolCall("a", { index: 0, arguments: '{"city":' });
      b.pushToolCall("a", { index: 0, arguments: '"Paris"}' });
      b.pushToolCall("a", { index: 1, name: "get_time", arguments: "{}" });
      b.push("a", "late text");
      b.end("a");
      expect(sent.slice(2)).toEqual([
        [
          {
            request_id: "a",
            text: " moment.",
            tool_calls: [
              { index: 0, name: "get_weather", arguments: '{"city":"Paris"}' },
              { index: 1, name: "get_time", arguments: "{}" },
            ],
          },
        ],
        [{ request_id: "a", text: "late text" }],
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a completion whose first piece is a call sends it at once; a call's piece merges only into the same call's last entry, and one naming a function never merges", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const sent: Piece[][] = [];
      const b = new ChunkBatcher((pieces) => sent.push(pieces), 30);
      b.pushToolCall("a", { index: 0, name: "get_weather", arguments: "" }); // the first piece: at once
      b.pushToolCall("a", { index: 1, name: "get_time", arguments: "" }); // at once: the link has not flushed yet
      b.pushToolCall("a", { index: 0, arguments: '{"city":"Paris"}' }); // two calls' pieces interleaved: gathered
      b.pushToolCall("a", { index: 1, arguments: "{}" });
      b.pushToolCall("a", { index: 1, name: "get_date", arguments: "" }); // its name is not lost in the entry before
      vi.advanceTimersByTime(30);
      // strict: an argument piece carries no name at all
      expect(sent).toStrictEqual([
        [{ request_id: "a", text: "", tool_calls: [{ index: 0, name: "get_weather", arguments: "" }] }],
        [{ request_id: "a", text: "", tool_calls: [{ index: 1, name: "get_time", arguments: "" }] }],
        [
          {
            request_id: "a",
            text: "",
            tool_calls: [
              { index: 0, arguments: '{"city":"Paris"}' },
              { index: 1, arguments: "{}" },
              { index: 1, name: "get_date", arguments: "" },
            ],
          },
        ],
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("gathers each choice of a completion apart, its pieces marked with its index (the first choice's with none)", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const sent: Piece[][] = [];
      const b = new ChunkBatcher((pieces) => sent.push(pieces), 30);
      b.push("a", "A0"); // the first piece: at once
      b.push("a", "B0", undefined, 1); // at once: the link has not flushed yet
      b.push("a", "C0", undefined, 2);
      b.push("a", "A1");
      b.push("a", "B1", undefined, 1);
      b.push("a", "C1", undefined, 2);
      b.end("a");
      expect(sent).toEqual([
        [{ request_id: "a", text: "A0" }],
        [{ request_id: "a", text: "B0", index: 1 }],
        [
          { request_id: "a", text: "C0C1", index: 2 },
          { request_id: "a", text: "A1" },
          { request_id: "a", text: "B1", index: 1 },
        ],
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("gathers the log probabilities of a completion's pieces with their text, in order", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const sent: Piece[][] = [];
      const b = new ChunkBatcher((pieces) => sent.push(pieces), 30);
      const lp = (token: string) => ({ token, logprob: -1, top_logprobs: [], text_offset: 0 });
      b.push("a", "Once", [lp("Once")]);
      b.push("a", " upon", [lp(" upon")]); // at once: the link has not flushed for longer than the interval
      b.push("a", " a", [lp(" a")]);
      b.push("a", " time", [lp(" ti"), lp("me")]);
      vi.advanceTimersByTime(30);
      expect(sent).toEqual([
        [{ request_id: "a", text: "Once", logprobs: [lp("Once")] }],
        [{ request_id: "a", text: " upon", logprobs: [lp(" upon")] }],
        [{ request_id: "a", text: " a time", logprobs: [lp(" a"), lp(" ti"), lp("me")] }],
      ]);
      sent.length = 0;
      const other = new ChunkBatcher((pieces) => sent.push(pieces), 30);
      other.push("b", "x");
      other.push("b", "y"); // at once: this link has not flushed yet
      other.push("b", " z"); // gathered, without log probabilities
      other.push("b", "!", [lp("!")]);
      vi.advanceTimersByTime(30);
      expect(sent.at(-1)).toEqual([{ request_id: "b", text: " z!", logprobs: [lp("!")] }]); // only the pieces' own
    } finally {
      vi.useRealTimers();
    }
  });

  it("sends what several completions gathered in one flush, each in the order it came", async () => {
    const sent: Piece[][] = [];
    const b = new ChunkBatcher((pieces) => sent.push(pieces), 20);
    for (const id of ["x", "y", "z"]) b.push(id, `${id}0`);
    b.push("z", "z1"); // flushes at once (nothing flushed yet)
    expect(sent).toHaveLength(4);
    b.push("y", "y1");
    b.push("x", "x1");
    b.push("y", "y2");
    b.push("z", "");
    await sleep(50);
    expect(sent.slice(4)).toEqual([
      [
        { request_id: "y", text: "y1y2" },
        { request_id: "x", text: "x1" },
      ],
    ]);
  });

  it("sends every piece with an interval of 0; discards a failed completion's pending text", async () => {
    const sent: Piece[][] = [];
    const now = new ChunkBatcher((pieces) => sent.push(pieces), 0);
    for (const t of ["a", "b", "", "c"]) now.push("r", t);
    expect(sent.flat().map((p) => p.text)).toEqual(["a", "b", "c"]);
    sent.length = 0;
    const slow = new ChunkBatcher((pieces) => sent.push(pieces), 1000);
    slow.push("r", "x");
    slow.push("r", "y"); // the first flush: at once
    slow.push("r", "z");
    expect(slow.discard("r")).toBe(true);
    expect(slow.discard("never-sent")).toBe(false);
    slow.end("r"); // nothing gathered: sends nothing
    expect(sent).toEqual([[{ request_id: "r", text: "x" }], [{ request_id: "r", text: "y" }]]);
    slow.push("r", "again"); // a forgotten id starts over: its first piece goes at once
    slow.close();
    expect(sent.flat().map((p) => p.text)).toEqual(["x", "y", "again"]);
  });

  it("close drops what was gathered: nothing goes out afterwards, and a new piece starts over", async () => {
    const sent: Piece[][] = [];
    const b = new ChunkBatcher((pieces) => sent.push(pieces), 20);
    b.push("a", "first");
    b.push("a", "second"); // flushed at once (nothing flushed yet)
    b.push("a", "gathered"); // waits for the interval
    b.close();
    await sleep(50);
    expect(sent.flat().map((p) => p.text)).toEqual(["first", "second"]);
    b.push("a", "anew");
    expect(sent.flat().map((p) => p.text)).toEqual(["first", "second", "anew"]); // a first piece again: at once
  });

  it("a flush with nothing gathered sends nothing, and one timer serves every completion", async () => {
    const sent: Piece[][] = [];
    const b = new ChunkBatcher((pieces) => sent.push(pieces), 20);
    b.push("a", "a0");
    b.push("b", "b0");
    b.push("a", "a1"); // flushed at once
    b.push("a", "a2");
    b.push("b", "b1"); // both wait for the same flush
    await sleep(50);
    expect(sent).toEqual([
      [{ request_id: "a", text: "a0" }],
      [{ request_id: "b", text: "b0" }],
      [{ request_id: "a", text: "a1" }],
      [
        { request_id: "a", text: "a2" },
        { request_id: "b", text: "b1" },
      ],
    ]);
    expect(sent.every((pieces) => pieces.length > 0)).toBe(true);
  });

  it("a piece that comes exactly an interval after the last flush goes out at once", () => {
    let now = 1000;
    const clock = vi.spyOn(performance, "now").mockImplementation(() => now);
    try {
      const sent: Piece[][] = [];
      const b = new ChunkBatcher((pieces) => sent.push(pieces), 20);
      b.push("a", "a0");
      b.push("a", "a1"); // the first flush, at 1000
      now = 1020;
      b.push("a", "a2");
      expect(texts(sent)).toEqual(["a:a0", "a:a1", "a:a2"]);
      b.close();
    } finally {
      clock.mockRestore();
    }
  });

  it("while a flush is due, a later piece waits for it even when the event loop ran late", async () => {
    const sent: Piece[][] = [];
    const b = new ChunkBatcher((pieces) => sent.push(pieces), 20);
    b.push("a", "a0");
    b.push("a", "a1"); // flushed at once
    b.push("a", "a2"); // a flush is due in 20 ms
    busy(30);
    b.push("a", "a3"); // past the due time, but the flush is already on its way
    expect(texts(sent)).toEqual(["a:a0", "a:a1"]);
    await sleep(30);
    expect(texts(sent)).toEqual(["a:a0", "a:a1", "a:a2a3"]);
  });

  it("ending or discarding one completion leaves the flush due for the others", async () => {
    const sent: Piece[][] = [];
    const b = new ChunkBatcher((pieces) => sent.push(pieces), 20);
    for (const id of ["a", "b", "c"]) b.push(id, `${id}0`);
    b.push("a", "a1"); // flushed at once
    b.push("a", "a2");
    b.push("b", "b1");
    b.push("c", "c1"); // all three wait for the next flush
    b.end("a"); // sends its own at once
    expect(b.discard("c")).toBe(true);
    expect(texts(sent)).toEqual(["a:a0", "b:b0", "c:c0", "a:a1", "a:a2"]);
    await sleep(50);
    expect(texts(sent)).toEqual(["a:a0", "b:b0", "c:c0", "a:a1", "a:a2", "b:b1"]);
  });

  it("once nothing is gathered, no flush stays due: a piece past the interval goes out at once", () => {
    const sent: Piece[][] = [];
    const b = new ChunkBatcher((pieces) => sent.push(pieces), 20);
    b.push("a", "a0");
    b.push("b", "b0");
    b.push("a", "a1"); // flushed at once
    b.push("a", "a2"); // a flush is due in 20 ms
    b.end("a"); // sends a2: nothing is gathered any more
    busy(30);
    b.push("b", "b1"); // the last flush is over 20 ms old
    expect(texts(sent)).toEqual(["a:a0", "b:b0", "a:a1", "a:a2", "b:b1"]);
    b.close();
  });
});

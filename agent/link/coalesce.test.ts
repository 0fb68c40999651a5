import { describe, expect, it } from "vitest";
import { ChunkBatcher, type Piece } from "./coalesce.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("ChunkBatcher", () => {
  it("sends a completion's first piece at once and gathers the next ones for the interval", async () => {
    const sent: Piece[][] = [];
    const b = new ChunkBatcher((pieces) => sent.push(pieces), 30);
    b.push("a", "Once");
    expect(sent).toEqual([[{ request_id: "a", text: "Once" }]]);
    b.push("a", " upon"); // the link has not flushed for longer than the interval: at once
    b.push("a", " a");
    b.push("a", " time");
    expect(sent).toHaveLength(2);
    await sleep(60);
    expect(sent.slice(1)).toEqual([[{ request_id: "a", text: " upon" }], [{ request_id: "a", text: " a time" }]]);
    b.push("a", ",");
    b.push("a", " there");
    b.end("a");
    expect(sent.slice(3)).toEqual([[{ request_id: "a", text: "," }], [{ request_id: "a", text: " there" }]]);
    await sleep(40);
    expect(sent).toHaveLength(5);
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
    expect(sent.slice(4)).toEqual([[{ request_id: "y", text: "y1y2" }, { request_id: "x", text: "x1" }]]);
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
    slow.end("r");
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
    expect(sent).toEqual([[{ request_id: "a", text: "a0" }], [{ request_id: "b", text: "b0" }], [{ request_id: "a", text: "a1" }], [{ request_id: "a", text: "a2" }, { request_id: "b", text: "b1" }]]);
    expect(sent.every((pieces) => pieces.length > 0)).toBe(true);
  });
});

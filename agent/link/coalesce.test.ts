import { describe, expect, it } from "vitest";
import { ChunkCoalescer } from "./coalesce.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("ChunkCoalescer", () => {
  it("sends the first piece at once and gathers the next ones for the interval", async () => {
    const sent: string[] = [];
    const c = new ChunkCoalescer((t) => sent.push(t), 30);
    c.push("Once");
    expect(sent).toEqual(["Once"]);
    c.push(" upon");
    c.push(" a");
    expect(sent).toEqual(["Once"]);
    await sleep(60);
    expect(sent).toEqual(["Once", " upon a"]);
    c.push(" time");
    c.flush();
    expect(sent.join("")).toBe("Once upon a time");
    await sleep(40);
    expect(sent).toEqual(["Once", " upon a", " time"]);
  });

  it("sends every piece with an interval of 0, and discards what is pending on request", async () => {
    const sent: string[] = [];
    const c = new ChunkCoalescer((t) => sent.push(t), 0);
    for (const t of ["a", "b", "", "c"]) c.push(t);
    expect(sent).toEqual(["a", "b", "c"]);
    const slow = new ChunkCoalescer((t) => sent.push(t), 1000);
    slow.push("x");
    slow.push("y");
    slow.discard();
    slow.flush();
    expect(sent).toEqual(["a", "b", "c", "x"]);
  });
});

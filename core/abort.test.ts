import { describe, expect, it } from "vitest";
import { untilAborted } from "./abort.js";

describe("untilAborted", () => {
  it("passes the outcome through, rejects as soon as the signal aborts (with its reason or the one given), and hands a late value on", async () => {
    expect(await untilAborted(Promise.resolve(1), new AbortController().signal)).toBe(1);
    expect(await untilAborted(Promise.resolve(2), undefined)).toBe(2);

    const stop = new AbortController();
    let settle: (v: string) => void = () => undefined;
    const late: string[] = [];
    const waiting = untilAborted(new Promise<string>((r) => (settle = r)), stop.signal, { late: (v) => late.push(v) });
    stop.abort(new Error("stopped"));
    await expect(waiting).rejects.toThrow("stopped");
    settle("a resource");
    await new Promise((r) => setTimeout(r, 0));
    expect(late).toEqual(["a resource"]);

    await expect(untilAborted(new Promise(() => undefined), AbortSignal.abort(), { reason: () => new Error("given") })).rejects.toThrow("given");
  });
});

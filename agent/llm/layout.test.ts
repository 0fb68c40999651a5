import { describe, expect, it } from "vitest";
import { gpuLayout } from "./layout.js";

describe("gpuLayout: the scheduler's bytes per device as llama.cpp's options", () => {
  it("keeps a model planned for one device on that device alone (split mode none, its main GPU)", () => {
    expect(gpuLayout([0, 0, 5_000])).toEqual({ splitMode: "none", mainGpu: 2 });
    expect(gpuLayout([7])).toEqual({ splitMode: "none", mainGpu: 0 });
  });

  it("splits a model planned over several devices by layer, in the planned proportions", () => {
    expect(gpuLayout([1_000, 0, 3_000])).toEqual({ splitMode: "layer", tensorSplit: [0.25, 0, 0.75] });
  });

  it("leaves llama.cpp's own split when the plan names no device", () => {
    expect(gpuLayout([])).toBeUndefined();
    expect(gpuLayout([0, 0])).toBeUndefined();
  });
});

/** Which CPU backend node-llama-cpp loads, on the real binding. */
import { describe, expect, it } from "vitest";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { CPU_BACKEND_FILE, installedCpuBackend, physicalCores, x86Features } from "./cpu-backend.js";

describe("CPU backend", () => {
  it("names the ggml SIMD options a CPU's flags allow (AVX-512 needs all five base flags)", () => {
    expect(x86Features(new Set(["sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"]))).toEqual(["GGML_SSE42", "GGML_AVX", "GGML_F16C", "GGML_FMA", "GGML_AVX2", "GGML_BMI2"]);
    expect(x86Features(new Set(["avx2", "avx512f", "avx512vbmi"]))).toEqual(["GGML_AVX2", "GGML_AVX512_VBMI"]);
    expect(x86Features(new Set(["avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw", "avx512_vnni"]))).toEqual(["GGML_AVX512", "GGML_AVX512_VNNI"]);
  });

  it("counts physical cores, not hyperthread siblings", () => {
    const cpu = (n: number, core: number, socket = 0) => `processor\t: ${n}\nphysical id\t: ${socket}\ncore id\t\t: ${core}\n`;
    expect(physicalCores([cpu(0, 0), cpu(1, 1), cpu(2, 0), cpu(3, 1)].join("\n"))).toBe(2);
    expect(physicalCores([cpu(0, 0), cpu(1, 0, 1)].join("\n"))).toBe(2);
    expect(physicalCores("processor\t: 0\n")).toBeGreaterThanOrEqual(1); // no topology: the logical count
    expect(physicalCores()).toBeGreaterThanOrEqual(1);
  });

  const installed = installedCpuBackend();
  it.skipIf(!installed)(`node-llama-cpp loads Kiln's shared-threadpool backend over its own variants${installed ? "" : " (skipped: not installed here; npm install builds it on Linux x86-64 with cmake and git)"}`, async () => {
    const loaded: string[] = [];
    const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.debug, logger: (_level, message) => { if (message.includes("loaded CPU backend")) loaded.push(message); } });
    await llama.dispose();
    expect(loaded.join("\n")).toContain(CPU_BACKEND_FILE);
  });
});

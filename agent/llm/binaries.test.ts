/** What llama.cpp binaries a process loaded, from its memory map. */
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { getLlama } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { loadedBinaries } from "./binaries.js";
import { TINY_MODEL } from "../../test/helpers/fleet.js";
import { installedAddon, PREBUILT_KINDS, prebuiltBinsDir } from "../../core/prebuilt.js";

describe("loadedBinaries", () => {
  it("reads the addon, its prebuilt folder and the ggml backends from a memory map", () => {
    const maps = [
      "7f0000000000-7f0000001000 r-xp 00000000 fd:01 1 /opt/kiln/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/llama-addon.stock.node",
      "7f0000002000-7f0000003000 r-xp 00000000 fd:01 2 /opt/kiln/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so",
      "7f0000004000-7f0000005000 r-xp 00000000 fd:01 3 /opt/kiln/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-base.so",
      "7f0000006000-7f0000007000 r-xp 00000000 fd:01 4 /opt/kiln/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cpu-haswell.so",
      "7f0000008000-7f0000009000 rw-p 00000000 00:00 0 [heap]",
    ].join("\n");
    expect(loadedBinaries(maps)).toEqual({
      addon: "/opt/kiln/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/llama-addon.stock.node",
      folder: "linux-x64-cuda",
      kilnAddon: false,
      backends: ["libggml-cpu-haswell.so", "libggml-cuda.so"],
    });
    expect(loadedBinaries("")).toEqual({ kilnAddon: false, backends: [] });
  });

  it("in this process, once node-llama-cpp is loaded: the CPU folder's addon, Kiln's build where the install put it", async () => {
    const llama = await getLlama({ gpu: false, build: "never" });
    try {
      const loaded = loadedBinaries();
      expect(loaded.folder).toBe("linux-x64");
      expect(loaded.addon).toMatch(/\/llama-addon\.node$/);
      // `npm install` builds and installs Kiln's addon (scripts/build-llama.ts) where it can; the stamp says whether it did.
      expect(loaded.kilnAddon).toBe(installedAddon() !== undefined);
      expect(loaded.backends.some((b) => b.startsWith("libggml-cpu"))).toBe(true);
    } finally {
      await llama.dispose();
    }
  });

  it("every GPU folder node-llama-cpp may load holds Kiln's addon, which loads with every symbol bound (no GPU driver needed)", (ctx) => {
    const kinds = PREBUILT_KINDS.filter((kind) => kind !== "cpu" && prebuiltBinsDir(kind));
    if (kinds.length === 0) return ctx.skip("no GPU folder of node-llama-cpp is installed");
    for (const kind of kinds) {
      const dir = prebuiltBinsDir(kind)!;
      expect(installedAddon(kind), kind).toMatchObject({ release: expect.stringMatching(/^v?\d/) });
      const check = spawnSync(process.execPath, ["-e", `process.dlopen({ exports: {} }, ${JSON.stringify(join(dir, "llama-addon.node"))})`], {
        env: { ...process.env, LD_LIBRARY_PATH: dir, LD_BIND_NOW: "1" },
        encoding: "utf8",
      });
      expect(check.status, `${kind}: ${check.stderr}`).toBe(0);
    }
  });

  it("the Vulkan folder's addon (Kiln's build) generates on a Vulkan device (here the software rasterizer, where installed)", async (ctx) => {
    if (!prebuiltBinsDir("vulkan")) return ctx.skip("node-llama-cpp's Vulkan binaries are not installed");
    // A child process: this one has loaded the CPU folder already.
    const script = `
      import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { getLlama } from "node-llama-cpp";
      import { loadedBinaries } from ${JSON.stringify(pathToFileURL(resolve("dist/agent/llm/binaries.js")).href)};
      const llama = await getLlama({ gpu: "vulkan", build: "never" }).catch((e) => { console.log(JSON.stringify({ unavailable: String(e.message) })); process.exit(0); });
      const model = await llama.loadModel({ modelPath: ${JSON.stringify(TINY_MODEL)} });
      const sequence = (await model.createContext({ contextSize: 256 })).getSequence();
      const tokens = [];
      for await (const t of sequence.evaluate(model.tokenize("Hello there"), { temperature: 0 })) { tokens.push(t); if (tokens.length === 8) break; }
      console.log(JSON.stringify({ gpu: llama.gpu, loaded: loadedBinaries(), tokens: tokens.length }));
      process.exit(0);`;
    // A module file inside the checkout (node-llama-cpp checks its binaries in a child of its own, which `-e` breaks).
    mkdirSync(resolve(".cache"), { recursive: true });
    const probe = resolve(".cache", "vulkan-probe.mjs");
    writeFileSync(probe, script);
    const child = spawnSync(process.execPath, [probe], { encoding: "utf8", timeout: 120_000 });
    const result = JSON.parse(child.stdout.trim().split("\n").pop() ?? "{}") as {
      unavailable?: string;
      gpu?: string;
      loaded?: { folder: string; kilnAddon: boolean; backends: string[] };
      tokens?: number;
    };
    if (result.unavailable) return ctx.skip(`no Vulkan device here: ${result.unavailable}`);
    expect(result).toMatchObject({ gpu: "vulkan", tokens: 8, loaded: { folder: "linux-x64-vulkan", kilnAddon: true } });
    expect(result.loaded!.backends).toContain("libggml-vulkan.so");
  }, 150_000);
});

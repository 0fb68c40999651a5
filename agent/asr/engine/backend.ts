/**
 * Which of node-llama-cpp's prebuilt folders whisper runs on. Each folder's whisper addon is probed
 * in a process of its own (a GPU runtime that fails to start, or crashes, costs that process only):
 * the first GPU kind the compute setting allows whose backends find a GPU wins, else the CPU folder.
 */
import type { Logger } from "../../../core/log.js";
import { installedWhisperAddon, type GpuKind, type PrebuiltKind } from "../../../core/prebuilt.js";
import { describeExit } from "../../../core/child.js";
import { forkEngine } from "./fork.js";
import type { BackendDevice } from "./native.js";

/** The agent's `--gpu` setting as whisper reads it (`metal` has no Linux build: CPU). */
export type WhisperCompute = GpuKind;

export interface WhisperBackend {
  /** The prebuilt folder whose addon the engine processes load. */
  kind: PrebuiltKind;
  /** Whether models go on the GPU. */
  gpu: boolean;
  /** The devices the probe found (empty for the CPU folder, which is not probed). */
  devices: BackendDevice[];
}

/** The folders to try for `compute`, best first; the CPU folder is always last. */
export function backendCandidates(compute: WhisperCompute): PrebuiltKind[] {
  switch (compute) {
    case "auto":
      return ["cuda", "vulkan", "cpu"];
    case "cuda":
      return ["cuda", "cpu"];
    case "vulkan":
      return ["vulkan", "cpu"];
    default:
      return ["cpu"];
  }
}

/** A probe that has not answered in this time has failed (a CUDA start takes seconds, not minutes). */
const PROBE_TIMEOUT_MS = 60_000;

/** Loads the addon of folder `kind` in a process of its own; resolves with the devices its backends found. */
export function probeBackend(kind: PrebuiltKind, timeoutMs = PROBE_TIMEOUT_MS): Promise<BackendDevice[]> {
  return new Promise((resolve, reject) => {
    const child = forkEngine("engine/probe-child.js", { KILN_WHISPER_KIND: kind });
    let answer: { devices?: BackendDevice[]; error?: string } | undefined;
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("message", (m: { devices?: BackendDevice[]; error?: string }) => {
      answer = m;
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (answer?.devices) resolve(answer.devices);
      else reject(new Error(answer?.error ?? `the probe process ended (${describeExit(code, signal)})`));
    });
  });
}

/** How `chooseWhisperBackend` looks at this machine (tests give their own). */
export interface BackendProbes {
  /** Whether folder `kind` has the whisper addon. Default: its stamp is there. */
  installed?: (kind: PrebuiltKind) => boolean;
  /** The devices folder `kind`'s backends find. Default: `probeBackend`. */
  probe?: (kind: PrebuiltKind) => Promise<BackendDevice[]>;
}

/** Chooses the folder for `compute` (see the module's comment); never fails: the CPU folder is the fallback. */
export async function chooseWhisperBackend(compute: WhisperCompute, logger: Logger, probes: BackendProbes = {}): Promise<WhisperBackend> {
  const { installed = (kind) => installedWhisperAddon(kind) !== undefined, probe = probeBackend } = probes;
  for (const kind of backendCandidates(compute)) {
    if (kind === "cpu") break;
    if (!installed(kind)) continue;
    try {
      const devices = await probe(kind);
      if (devices.some((d) => d.type === "gpu" || d.type === "igpu")) {
        logger.info({ backend: kind, devices: devices.map((d) => `${d.name}: ${d.description}`) }, "whisper runs on the GPU");
        return { kind, gpu: true, devices };
      }
      if (compute !== "auto")
        logger.warn({ backend: kind, devices: devices.map((d) => d.name) }, `--gpu ${compute}: whisper's ${kind} backend found no GPU; transcription runs on the CPU`);
    } catch (err) {
      logger.warn({ backend: kind, err: err instanceof Error ? err.message : String(err) }, `whisper's ${kind} backend failed to start; trying the next`);
    }
  }
  return { kind: "cpu", gpu: false, devices: [] };
}

/**
 * A voice-activity model with Silero VAD v5's interface (inputs `input` [1, N], `state`
 * [2, 1, 128], `sr`; outputs `output` [1, 1], `stateN`) whose "probability" is a logistic of the
 * window's log energy. sherpa-onnx runs it exactly as it runs Silero, so the suite exercises the
 * real VAD path on a fresh clone; on real speech, use the real `silero_vad.onnx`.
 */
import { writeFile } from "node:fs/promises";
import { encodeOnnxModel, OnnxType } from "./onnx-writer.js";

export interface EnergyVadOptions {
  /** RMS level (full scale 1.0) at which the probability is 0.5. Default 0.01 (−40 dBFS). */
  thresholdRms?: number;
  /** Steepness of the logistic in nepers of mean power. Default 2. */
  slope?: number;
}

export function energyVadModel(options: EnergyVadOptions = {}): Buffer {
  const rms = options.thresholdRms ?? 0.01;
  const slope = options.slope ?? 2;
  const scalar = (name: string, value: number) => ({ name, dims: [1], values: [value] });
  return encodeOnnxModel({
    name: "kiln-energy-vad",
    inputs: [
      { name: "input", type: OnnxType.FLOAT, shape: [1, "samples"] },
      { name: "state", type: OnnxType.FLOAT, shape: [2, 1, 128] },
      { name: "sr", type: OnnxType.INT64, shape: [1] },
    ],
    outputs: [
      { name: "output", type: OnnxType.FLOAT, shape: [1, 1] },
      { name: "stateN", type: OnnxType.FLOAT, shape: [2, 1, 128] },
    ],
    initializers: [scalar("eps", 1e-10), scalar("log_threshold", Math.log(rms * rms)), scalar("slope", slope)],
    nodes: [
      { op: "Mul", inputs: ["input", "input"], outputs: ["power"] },
      { op: "ReduceMean", inputs: ["power"], outputs: ["mean_power"], attributes: { axes: [1], keepdims: 1 } },
      { op: "Add", inputs: ["mean_power", "eps"], outputs: ["mean_power_eps"] },
      { op: "Log", inputs: ["mean_power_eps"], outputs: ["log_power"] },
      { op: "Sub", inputs: ["log_power", "log_threshold"], outputs: ["above"] },
      { op: "Mul", inputs: ["above", "slope"], outputs: ["logit"] },
      { op: "Sigmoid", inputs: ["logit"], outputs: ["output"] },
      { op: "Identity", inputs: ["state"], outputs: ["stateN"] },
    ],
  });
}

export async function writeEnergyVad(path: string, options?: EnergyVadOptions): Promise<void> {
  await writeFile(path, energyVadModel(options));
}

/**
 * A small ONNX model writer over the `onnx.proto` subset of core/onnx.ts (a graph of standard
 * operators with float initializers). Used to fabricate test models that sherpa-onnx loads
 * through the real onnxruntime.
 */
import { onnxModelType } from "../core/onnx.js";

/** ONNX element types used here. */
export const OnnxType = { FLOAT: 1, INT64: 7 } as const;
const ATTRIBUTE_TYPE = { FLOAT: 1, INT: 2, STRING: 3, FLOATS: 6, INTS: 7 } as const;

/** A graph input or output: name, element type and shape (a string is a symbolic dimension). */
export interface OnnxValue {
  name: string;
  type: (typeof OnnxType)[keyof typeof OnnxType];
  shape: (number | string)[];
}

export type OnnxAttribute = number | string | number[] | { floats: number[] };

export interface OnnxNode {
  op: string;
  inputs: string[];
  outputs: string[];
  /** Whole numbers become INT(S) attributes; use `{ floats }` or a fractional number for floats. */
  attributes?: Record<string, OnnxAttribute>;
}

export interface OnnxInitializer {
  name: string;
  dims: number[];
  values: Float32Array | number[];
}

export interface OnnxModel {
  inputs: OnnxValue[];
  outputs: OnnxValue[];
  nodes: OnnxNode[];
  initializers?: OnnxInitializer[];
  /** String metadata (`metadata_props`), as sherpa-onnx reads it. */
  metadata?: Record<string, string>;
  /** Default 13. */
  opset?: number;
  name?: string;
}

function attribute(name: string, value: OnnxAttribute): Record<string, unknown> {
  if (typeof value === "string") return { name, type: ATTRIBUTE_TYPE.STRING, s: Buffer.from(value, "utf8") };
  if (Array.isArray(value)) return { name, type: ATTRIBUTE_TYPE.INTS, ints: value };
  if (typeof value === "object") return { name, type: ATTRIBUTE_TYPE.FLOATS, floats: value.floats };
  return Number.isInteger(value) ? { name, type: ATTRIBUTE_TYPE.INT, i: value } : { name, type: ATTRIBUTE_TYPE.FLOAT, f: value };
}

function valueInfo(v: OnnxValue): Record<string, unknown> {
  const dim = v.shape.map((d) => (typeof d === "number" ? { dim_value: d } : { dim_param: d }));
  return { name: v.name, type: { tensor_type: { elem_type: v.type, shape: { dim } } } };
}

/** Serializes the model (IR version 8) to the bytes of an `.onnx` file. */
export function encodeOnnxModel(model: OnnxModel): Buffer {
  const type = onnxModelType();
  const message = type.fromObject({
    ir_version: 8,
    producer_name: "kiln",
    producer_version: "1",
    opset_import: [{ domain: "", version: model.opset ?? 13 }],
    metadata_props: Object.entries(model.metadata ?? {}).map(([key, value]) => ({ key, value })),
    graph: {
      name: model.name ?? "kiln",
      input: model.inputs.map(valueInfo),
      output: model.outputs.map(valueInfo),
      initializer: (model.initializers ?? []).map((t) => {
        const data = Float32Array.from(t.values);
        return { name: t.name, dims: t.dims, data_type: OnnxType.FLOAT, raw_data: Buffer.from(data.buffer, data.byteOffset, data.byteLength) };
      }),
      node: model.nodes.map((n, i) => ({
        name: `${n.op.toLowerCase()}_${i}`,
        op_type: n.op,
        input: n.inputs,
        output: n.outputs,
        attribute: Object.entries(n.attributes ?? {}).map(([k, v]) => attribute(k, v)),
      })),
    },
  });
  return Buffer.from(type.encode(message).finish());
}

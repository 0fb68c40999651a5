/**
 * A hand-written subset of `onnx.proto` (protobufjs), enough to write small graphs and to read a
 * model's signature (graph inputs, outputs, metadata) before handing it to a native runtime that
 * would kill the process on a wrong one (sherpa-onnx calls exit() on an unexpected model).
 */
import protobuf from "protobufjs";

const ONNX_SUBSET = `
syntax = "proto3";
package onnx;
message StringStringEntryProto { string key = 1; string value = 2; }
message OperatorSetIdProto { string domain = 1; int64 version = 2; }
message TensorProto {
  repeated int64 dims = 1;
  int32 data_type = 2;
  string name = 8;
  bytes raw_data = 9;
}
message TensorShapeProto {
  message Dimension { oneof value { int64 dim_value = 1; string dim_param = 2; } }
  repeated Dimension dim = 1;
}
message TypeProto {
  message Tensor { int32 elem_type = 1; TensorShapeProto shape = 2; }
  oneof value { Tensor tensor_type = 1; }
}
message ValueInfoProto { string name = 1; TypeProto type = 2; }
message AttributeProto {
  string name = 1;
  float f = 2;
  int64 i = 3;
  bytes s = 4;
  repeated float floats = 7;
  repeated int64 ints = 8;
  int32 type = 20;
}
message NodeProto {
  repeated string input = 1;
  repeated string output = 2;
  string name = 3;
  string op_type = 4;
  repeated AttributeProto attribute = 5;
  string domain = 7;
}
message GraphProto {
  repeated NodeProto node = 1;
  string name = 2;
  repeated TensorProto initializer = 5;
  repeated ValueInfoProto input = 11;
  repeated ValueInfoProto output = 12;
}
message ModelProto {
  int64 ir_version = 1;
  string producer_name = 2;
  string producer_version = 3;
  GraphProto graph = 7;
  repeated OperatorSetIdProto opset_import = 8;
  repeated StringStringEntryProto metadata_props = 14;
}
`;

let modelType: protobuf.Type | undefined;
export function onnxModelType(): protobuf.Type {
  modelType ??= protobuf.parse(ONNX_SUBSET, { keepCase: true }).root.lookupType("onnx.ModelProto");
  return modelType;
}

/** What a loader needs to know about an ONNX file before loading it. */
export interface OnnxSignature {
  inputs: string[];
  outputs: string[];
  metadata: Record<string, string>;
}

interface DecodedModel {
  graph?: { input?: { name?: string }[]; output?: { name?: string }[]; initializer?: { name?: string }[] };
  metadata_props?: { key?: string; value?: string }[];
}

/** Reads the graph's real inputs (initializers excluded), outputs and metadata. Throws on non-ONNX bytes. */
export function readOnnxSignature(bytes: Uint8Array): OnnxSignature {
  const model = onnxModelType().toObject(onnxModelType().decode(bytes), { defaults: false }) as DecodedModel;
  if (!model.graph) throw new Error("not an ONNX model (no graph)");
  const initializers = new Set((model.graph.initializer ?? []).map((t) => t.name));
  return {
    inputs: (model.graph.input ?? []).map((v) => v.name ?? "").filter((n) => !initializers.has(n)),
    outputs: (model.graph.output ?? []).map((v) => v.name ?? ""),
    metadata: Object.fromEntries((model.metadata_props ?? []).map((e) => [e.key ?? "", e.value ?? ""])),
  };
}

// Original file: proto/kiln/v1/fleet.proto


export interface ToolCall {
  'id'?: (string);
  'name'?: (string);
  'arguments'?: (string);
}

export interface ToolCall__Output {
  'id': (string);
  'name': (string);
  'arguments': (string);
}

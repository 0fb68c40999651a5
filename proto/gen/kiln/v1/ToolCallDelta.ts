// Original file: proto/kiln/v1/fleet.proto


export interface ToolCallDelta {
  'index'?: (number);
  'name'?: (string);
  'arguments'?: (string);
}

export interface ToolCallDelta__Output {
  'index': (number);
  'name': (string);
  'arguments': (string);
}

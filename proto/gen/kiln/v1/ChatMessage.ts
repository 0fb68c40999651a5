// Original file: proto/kiln/v1/fleet.proto


export interface ChatMessage {
  'role'?: (string);
  'content'?: (string);
}

export interface ChatMessage__Output {
  'role': (string);
  'content': (string);
}

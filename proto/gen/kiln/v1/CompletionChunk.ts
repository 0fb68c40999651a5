// Original file: proto/kiln/v1/fleet.proto


export interface CompletionChunk {
  'request_id'?: (string);
  'text'?: (string);
}

export interface CompletionChunk__Output {
  'request_id': (string);
  'text': (string);
}

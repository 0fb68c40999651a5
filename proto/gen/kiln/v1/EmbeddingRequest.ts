// Original file: proto/kiln/v1/fleet.proto


export interface EmbeddingRequest {
  'request_id'?: (string);
  'model'?: (string);
  'inputs'?: (string)[];
  'trace_id'?: (string);
  'dimensions'?: (number);
}

export interface EmbeddingRequest__Output {
  'request_id': (string);
  'model': (string);
  'inputs': (string)[];
  'trace_id': (string);
  'dimensions': (number);
}

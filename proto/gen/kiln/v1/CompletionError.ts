// Original file: proto/kiln/v1/fleet.proto


export interface CompletionError {
  'request_id'?: (string);
  'code'?: (string);
  'message'?: (string);
  'retryable'?: (boolean);
}

export interface CompletionError__Output {
  'request_id': (string);
  'code': (string);
  'message': (string);
  'retryable': (boolean);
}

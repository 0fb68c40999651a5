// Original file: proto/kiln/v1/fleet.proto


export interface CancelCompletion {
  'request_id'?: (string);
}

export interface CancelCompletion__Output {
  'request_id': (string);
}

// Original file: proto/kiln/v1/fleet.proto


export interface ModelPool {
  'model_ids'?: (string)[];
  'slots'?: (number);
  'context_size'?: (number);
  'fingerprint'?: (string);
  'capabilities'?: (string)[];
}

export interface ModelPool__Output {
  'model_ids': (string)[];
  'slots': (number);
  'context_size': (number);
  'fingerprint': (string);
  'capabilities': (string)[];
}

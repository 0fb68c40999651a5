// Original file: proto/kiln/v1/fleet.proto


export interface Registered {
  'node_id'?: (string);
  'heartbeat_interval_ms'?: (number);
  'accepts_chunks'?: (boolean);
}

export interface Registered__Output {
  'node_id': (string);
  'heartbeat_interval_ms': (number);
  'accepts_chunks': (boolean);
}

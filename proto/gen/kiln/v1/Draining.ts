// Original file: proto/kiln/v1/fleet.proto


export interface Draining {
  'deadline_ms'?: (number);
}

export interface Draining__Output {
  'deadline_ms': (number);
}

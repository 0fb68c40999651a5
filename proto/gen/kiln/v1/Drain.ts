// Original file: proto/kiln/v1/fleet.proto


export interface Drain {
  'deadline_ms'?: (number);
}

export interface Drain__Output {
  'deadline_ms': (number);
}

// Original file: proto/kiln/v1/fleet.proto


export interface Vector {
  'values'?: (number | string)[];
}

export interface Vector__Output {
  'values': (number)[];
}

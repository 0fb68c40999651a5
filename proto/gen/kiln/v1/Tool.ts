// Original file: proto/kiln/v1/fleet.proto


export interface Tool {
  'name'?: (string);
  'description'?: (string);
  'parameters'?: (string);
}

export interface Tool__Output {
  'name': (string);
  'description': (string);
  'parameters': (string);
}

// Original file: proto/kiln/v1/fleet.proto


export interface ResponseFormat {
  'type'?: (string);
  'json_schema'?: (string);
}

export interface ResponseFormat__Output {
  'type': (string);
  'json_schema': (string);
}

// Original file: proto/kiln/v1/fleet.proto


export interface AudioChunk {
  'request_id'?: (string);
  'data'?: (Buffer | Uint8Array | string);
  'last'?: (boolean);
  'fields'?: ({[key: string]: string});
}

export interface AudioChunk__Output {
  'request_id': (string);
  'data': (Buffer);
  'last': (boolean);
  'fields': ({[key: string]: string});
}

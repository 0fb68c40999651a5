// Original file: proto/kiln/v1/fleet.proto


export interface TranscriptionSegments {
  'request_id'?: (string);
  'segments_json'?: (string);
}

export interface TranscriptionSegments__Output {
  'request_id': (string);
  'segments_json': (string);
}

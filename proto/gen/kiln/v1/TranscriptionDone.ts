// Original file: proto/kiln/v1/fleet.proto


export interface TranscriptionDone {
  'request_id'?: (string);
  'transcript_json'?: (string);
}

export interface TranscriptionDone__Output {
  'request_id': (string);
  'transcript_json': (string);
}

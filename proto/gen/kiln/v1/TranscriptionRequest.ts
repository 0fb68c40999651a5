// Original file: proto/kiln/v1/fleet.proto


export interface TranscriptionRequest {
  'request_id'?: (string);
  'trace_id'?: (string);
  'fields'?: ({[key: string]: string});
  'file_name'?: (string);
}

export interface TranscriptionRequest__Output {
  'request_id': (string);
  'trace_id': (string);
  'fields': ({[key: string]: string});
  'file_name': (string);
}

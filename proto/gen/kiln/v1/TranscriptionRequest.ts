// Original file: proto/kiln/v1/fleet.proto

import type { TranscriptionOptions as _kiln_v1_TranscriptionOptions, TranscriptionOptions__Output as _kiln_v1_TranscriptionOptions__Output } from '../../kiln/v1/TranscriptionOptions.js';

export interface TranscriptionRequest {
  'request_id'?: (string);
  'trace_id'?: (string);
  'fields'?: ({[key: string]: string});
  'file_name'?: (string);
  'options'?: (_kiln_v1_TranscriptionOptions | null);
}

export interface TranscriptionRequest__Output {
  'request_id': (string);
  'trace_id': (string);
  'fields': ({[key: string]: string});
  'file_name': (string);
  'options': (_kiln_v1_TranscriptionOptions__Output | null);
}

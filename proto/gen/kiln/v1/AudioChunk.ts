// Original file: proto/kiln/v1/fleet.proto

import type { TranscriptionOptions as _kiln_v1_TranscriptionOptions, TranscriptionOptions__Output as _kiln_v1_TranscriptionOptions__Output } from '../../kiln/v1/TranscriptionOptions.js';

export interface AudioChunk {
  'request_id'?: (string);
  'data'?: (Buffer | Uint8Array | string);
  'last'?: (boolean);
  'fields'?: ({[key: string]: string});
  'options'?: (_kiln_v1_TranscriptionOptions | null);
}

export interface AudioChunk__Output {
  'request_id': (string);
  'data': (Buffer);
  'last': (boolean);
  'fields': ({[key: string]: string});
  'options': (_kiln_v1_TranscriptionOptions__Output | null);
}

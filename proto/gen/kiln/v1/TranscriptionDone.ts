// Original file: proto/kiln/v1/fleet.proto

import type { Transcript as _kiln_v1_Transcript, Transcript__Output as _kiln_v1_Transcript__Output } from '../../kiln/v1/Transcript.js';

export interface TranscriptionDone {
  'request_id'?: (string);
  'transcript_json'?: (string);
  'transcript'?: (_kiln_v1_Transcript | null);
}

export interface TranscriptionDone__Output {
  'request_id': (string);
  'transcript_json': (string);
  'transcript': (_kiln_v1_Transcript__Output | null);
}

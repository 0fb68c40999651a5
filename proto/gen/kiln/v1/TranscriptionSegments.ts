// Original file: proto/kiln/v1/fleet.proto

import type { TranscriptSegment as _kiln_v1_TranscriptSegment, TranscriptSegment__Output as _kiln_v1_TranscriptSegment__Output } from '../../kiln/v1/TranscriptSegment.js';

export interface TranscriptionSegments {
  'request_id'?: (string);
  'segments_json'?: (string);
  'segments'?: (_kiln_v1_TranscriptSegment)[];
}

export interface TranscriptionSegments__Output {
  'request_id': (string);
  'segments_json': (string);
  'segments': (_kiln_v1_TranscriptSegment__Output)[];
}

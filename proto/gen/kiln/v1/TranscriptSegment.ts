// Original file: proto/kiln/v1/fleet.proto

import type { TranscriptWord as _kiln_v1_TranscriptWord, TranscriptWord__Output as _kiln_v1_TranscriptWord__Output } from '../../kiln/v1/TranscriptWord.js';

export interface TranscriptSegment {
  'id'?: (number);
  'start'?: (number | string);
  'end'?: (number | string);
  'text'?: (string);
  'words'?: (_kiln_v1_TranscriptWord)[];
  'speaker'?: (string);
  'original_text'?: (string);
  '_speaker'?: "speaker";
  '_original_text'?: "original_text";
}

export interface TranscriptSegment__Output {
  'id': (number);
  'start': (number);
  'end': (number);
  'text': (string);
  'words': (_kiln_v1_TranscriptWord__Output)[];
  'speaker'?: (string);
  'original_text'?: (string);
  '_speaker'?: "speaker";
  '_original_text'?: "original_text";
}

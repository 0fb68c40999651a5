// Original file: proto/kiln/v1/fleet.proto

import type { TranscriptSegment as _kiln_v1_TranscriptSegment, TranscriptSegment__Output as _kiln_v1_TranscriptSegment__Output } from '../../kiln/v1/TranscriptSegment.js';
import type { SpeakerTurns as _kiln_v1_SpeakerTurns, SpeakerTurns__Output as _kiln_v1_SpeakerTurns__Output } from '../../kiln/v1/SpeakerTurns.js';

export interface Transcript {
  'text'?: (string);
  'language'?: (string);
  'language_probability'?: (number | string);
  'duration'?: (number | string);
  'task'?: (string);
  'model'?: (string);
  'segments'?: (_kiln_v1_TranscriptSegment)[];
  'transcript_with_speakers'?: (_kiln_v1_SpeakerTurns | null);
  'translated_to'?: (string);
  'original_text'?: (string);
  '_language_probability'?: "language_probability";
  '_translated_to'?: "translated_to";
  '_original_text'?: "original_text";
}

export interface Transcript__Output {
  'text': (string);
  'language': (string);
  'language_probability'?: (number);
  'duration': (number);
  'task': (string);
  'model': (string);
  'segments': (_kiln_v1_TranscriptSegment__Output)[];
  'transcript_with_speakers': (_kiln_v1_SpeakerTurns__Output | null);
  'translated_to'?: (string);
  'original_text'?: (string);
  '_language_probability'?: "language_probability";
  '_translated_to'?: "translated_to";
  '_original_text'?: "original_text";
}

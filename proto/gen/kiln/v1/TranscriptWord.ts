// Original file: proto/kiln/v1/fleet.proto


export interface TranscriptWord {
  'word'?: (string);
  'start'?: (number | string);
  'end'?: (number | string);
  'confidence'?: (number | string);
  'speaker'?: (string);
  '_speaker'?: "speaker";
}

export interface TranscriptWord__Output {
  'word': (string);
  'start': (number);
  'end': (number);
  'confidence': (number);
  'speaker'?: (string);
  '_speaker'?: "speaker";
}

// Original file: proto/kiln/v1/fleet.proto


export interface SpeakerTurn {
  'speaker'?: (string);
  'start'?: (number | string);
  'end'?: (number | string);
  'text'?: (string);
  'original_text'?: (string);
  '_original_text'?: "original_text";
}

export interface SpeakerTurn__Output {
  'speaker': (string);
  'start': (number);
  'end': (number);
  'text': (string);
  'original_text'?: (string);
  '_original_text'?: "original_text";
}

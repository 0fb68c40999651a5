// Original file: proto/kiln/v1/fleet.proto


export interface Usage {
  'prompt_tokens'?: (number);
  'completion_tokens'?: (number);
  'cached_tokens'?: (number);
}

export interface Usage__Output {
  'prompt_tokens': (number);
  'completion_tokens': (number);
  'cached_tokens': (number);
}

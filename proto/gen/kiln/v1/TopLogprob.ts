// Original file: proto/kiln/v1/fleet.proto


export interface TopLogprob {
  'token'?: (string);
  'logprob'?: (number | string);
}

export interface TopLogprob__Output {
  'token': (string);
  'logprob': (number);
}

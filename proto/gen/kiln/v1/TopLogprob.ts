// Original file: proto/kiln/v1/fleet.proto


export interface TopLogprob {
  'token'?: (string);
  'logprob'?: (number | string);
  'raw'?: (Buffer | Uint8Array | string);
}

export interface TopLogprob__Output {
  'token': (string);
  'logprob': (number);
  'raw': (Buffer);
}

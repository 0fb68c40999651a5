// Original file: proto/kiln/v1/fleet.proto

import type { TopLogprob as _kiln_v1_TopLogprob, TopLogprob__Output as _kiln_v1_TopLogprob__Output } from '../../kiln/v1/TopLogprob.js';

export interface TokenLogprob {
  'token'?: (string);
  'logprob'?: (number | string);
  'top_logprobs'?: (_kiln_v1_TopLogprob)[];
  'text_offset'?: (number);
  'raw'?: (Buffer | Uint8Array | string);
}

export interface TokenLogprob__Output {
  'token': (string);
  'logprob': (number);
  'top_logprobs': (_kiln_v1_TopLogprob__Output)[];
  'text_offset': (number);
  'raw': (Buffer);
}

// Original file: proto/kiln/v1/fleet.proto

import type { TokenLogprob as _kiln_v1_TokenLogprob, TokenLogprob__Output as _kiln_v1_TokenLogprob__Output } from '../../kiln/v1/TokenLogprob.js';

export interface CompletionChunk {
  'request_id'?: (string);
  'text'?: (string);
  'logprobs'?: (_kiln_v1_TokenLogprob)[];
  'index'?: (number);
}

export interface CompletionChunk__Output {
  'request_id': (string);
  'text': (string);
  'logprobs': (_kiln_v1_TokenLogprob__Output)[];
  'index': (number);
}

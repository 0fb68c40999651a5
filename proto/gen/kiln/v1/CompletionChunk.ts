// Original file: proto/kiln/v1/fleet.proto

import type { TokenLogprob as _kiln_v1_TokenLogprob, TokenLogprob__Output as _kiln_v1_TokenLogprob__Output } from '../../kiln/v1/TokenLogprob.js';
import type { ToolCallDelta as _kiln_v1_ToolCallDelta, ToolCallDelta__Output as _kiln_v1_ToolCallDelta__Output } from '../../kiln/v1/ToolCallDelta.js';

export interface CompletionChunk {
  'request_id'?: (string);
  'text'?: (string);
  'logprobs'?: (_kiln_v1_TokenLogprob)[];
  'index'?: (number);
  'tool_calls'?: (_kiln_v1_ToolCallDelta)[];
}

export interface CompletionChunk__Output {
  'request_id': (string);
  'text': (string);
  'logprobs': (_kiln_v1_TokenLogprob__Output)[];
  'index': (number);
  'tool_calls': (_kiln_v1_ToolCallDelta__Output)[];
}
